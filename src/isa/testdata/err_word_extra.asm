; expect: lenient 2:10: expected the end of the line after the .word value, found '2'
.word 1, 2

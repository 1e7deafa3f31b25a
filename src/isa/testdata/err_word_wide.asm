; expect: lenient 2:7: .word value '0x100000000' out of range (expected 0..4294967295)
.word 0x100000000

; expect: lenient 3:6: expected .word value (unsigned decimal or 0x hex), found ''
C_BREAK
.word ; nothing

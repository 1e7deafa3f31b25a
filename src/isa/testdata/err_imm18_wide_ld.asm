; expect: lenient 2:20: imm18 '0x40000' out of range (expected 0..262143)
S_LD_INT gp1, gp2, 0x40000

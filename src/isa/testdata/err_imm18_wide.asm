; expect: lenient 2:22: imm18 '262144' out of range (expected 0..262143; build larger constants with S_LUI_INT + S_ADDI_INT)
S_ADDI_INT gp1, gp2, 262144

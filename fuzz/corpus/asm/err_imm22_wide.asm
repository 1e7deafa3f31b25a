
; expect: lenient 2:16: imm22 '4194304' out of range (expected 0..4194303)
S_LUI_INT gp1, 4194304

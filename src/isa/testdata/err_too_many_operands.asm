; expect: lenient 2:19: S_LUI_INT takes 2 operands, found 3
S_LUI_INT gp1, 8, 9

; expect: lenient 2:15: empty operand
S_ADD_INT gp1,, gp2

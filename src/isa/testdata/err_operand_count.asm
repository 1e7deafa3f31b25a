; expect: lenient 2:16: S_ADD_INT takes 3 to 6 operands, found 2 (expected G, G, G)
S_ADD_INT gp1, gp2

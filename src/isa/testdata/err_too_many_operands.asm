; expect: lenient 2:35: S_ADD_INT takes 3 to 6 operands, found 7 (expected G, G, G)
S_ADD_INT gp1, gp2, gp3, 0, 0, 0, 0

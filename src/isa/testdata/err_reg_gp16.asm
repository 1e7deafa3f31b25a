; expect: lenient 2:16: register 'gp16' out of range (expected gp0..gp15)
S_ADD_INT gp1, gp16, gp2

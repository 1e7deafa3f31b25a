; expect: lenient 2:16: expected a gp register gp0..gp15, found '5'
S_ADD_INT gp1, 5, gp2

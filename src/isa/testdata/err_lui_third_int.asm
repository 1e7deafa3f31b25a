; expect: lenient 2:19: expected a gp register gp0..gp15, found '9'
S_LUI_INT gp1, 8, 9

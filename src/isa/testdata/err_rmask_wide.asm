; expect: lenient 2:25: rmask '16' out of range (expected 0..15)
V_ADD_VV gp1, gp2, gp3, 16

; expect: strict 2:7: M_BMM rd 2 (expected 0
M_BMM 2, gp1, gp2

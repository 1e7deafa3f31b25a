; expect: lenient 2:24: register 'a16' out of range (expected a0..a15)
H_PREFETCH_M gp1, gp2, a16


; expect: strict 2:28: rstride 2 (expected 0 or 1
H_PREFETCH_V gp1, gp2, a0, 2

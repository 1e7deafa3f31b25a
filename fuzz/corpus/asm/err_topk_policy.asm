
; expect: strict 2:23: V_TOPK policy 7 (expected 0, 1 or 15
V_TOPK gp1, gp2, gp3, 7

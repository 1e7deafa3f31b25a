; expect: strict 2:14: register kind mismatch: 'gp3' (expected an fp register f0..f7)
S_ADD_FP f1, gp3, f2

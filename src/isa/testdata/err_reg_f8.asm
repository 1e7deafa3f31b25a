; expect: lenient 2:14: register 'f8' out of range (expected f0..f7)
S_ADD_FP f1, f8, f2


; expect: lenient 2:1: unknown mnemonic 'V_PS_V'
V_PS_V gp1, gp2, gp3

//go:build !purego

#include "textflag.h"

// func prefetchNext(bk *[128]byte)
TEXT ·prefetchNext(SB), NOSPLIT|NOFRAME, $0-8
	MOVD bk+0(FP), R0
	PRFM 64(R0), PLDL1KEEP
	PRFM 128(R0), PLDL1KEEP
	PRFM 192(R0), PLDL1KEEP
	RET

// func prefetchPair(bk *[128]byte)
TEXT ·prefetchPair(SB), NOSPLIT|NOFRAME, $0-8
	MOVD bk+0(FP), R0
	PRFM (R0), PLDL1KEEP
	PRFM 64(R0), PLDL1KEEP
	RET

//go:build !purego

#include "textflag.h"

// func prefetchNext(bk *[128]byte)
TEXT ·prefetchNext(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ bk+0(FP), AX
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	PREFETCHT0 192(AX)
	RET

// func prefetchPair(bk *[128]byte)
TEXT ·prefetchPair(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ bk+0(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	RET

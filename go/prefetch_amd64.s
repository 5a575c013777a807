//go:build !purego

#include "textflag.h"

// func prefetchNext(bk *[128]byte)
TEXT ·prefetchNext(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ bk+0(FP), AX
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	PREFETCHT0 192(AX)
	RET

// func prefetchLine(p *byte)
TEXT ·prefetchLine(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET

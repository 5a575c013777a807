//go:build !purego

#include "textflag.h"

// func prefetchNext(bk *[128]byte)
TEXT ·prefetchNext(SB), NOSPLIT|NOFRAME, $0-8
	MOVD bk+0(FP), R0
	PRFM 64(R0), PLDL1KEEP
	PRFM 128(R0), PLDL1KEEP
	PRFM 192(R0), PLDL1KEEP
	RET

// func prefetchHome(bk *[128]byte)
TEXT ·prefetchHome(SB), NOSPLIT|NOFRAME, $0-8
	MOVD bk+0(FP), R0
	PRFM (R0), PLDL1KEEP
	PRFM 64(R0), PLDL1KEEP
	PRFM 128(R0), PLDL1KEEP
	PRFM 192(R0), PLDL1KEEP
	RET

// func prefetchHomes(bks *[8]*[128]byte): both lines of each home bucket.
TEXT ·prefetchHomes(SB), NOSPLIT|NOFRAME, $0-8
	MOVD bks+0(FP), R0
	MOVD $8, R1
loop:
	MOVD.P 8(R0), R2
	PRFM (R2), PLDL1KEEP
	PRFM 64(R2), PLDL1KEEP
	SUBS $1, R1, R1
	BNE loop
	RET

// func prefetchNexts(bks *[8]*[128]byte, ann *[8]bool): both lines of
// bucket b+1 where ann says so; elsewhere the home again (in cache): no branch.
TEXT ·prefetchNexts(SB), NOSPLIT|NOFRAME, $0-16
	MOVD bks+0(FP), R0
	MOVD ann+8(FP), R1
	MOVD $8, R4
loop:
	MOVD.P 8(R0), R2
	MOVBU.P 1(R1), R3
	ADD R3<<7, R2, R2
	PRFM (R2), PLDL1KEEP
	PRFM 64(R2), PLDL1KEEP
	SUBS $1, R4, R4
	BNE loop
	RET

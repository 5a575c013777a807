package org.shmkv;

/**
 * A delta image's identity and the image it changes (FORMAT.md §19.1), as
 * {@link ShmkvReader#deltaId()} reads them from its header.
 *
 * @param checksum the delta's own header checksum (the prev of the next delta of its chain)
 * @param baseChecksum the header checksum of the image it applies to (its base)
 * @param baseSize the base's size in bytes
 * @param prev the header checksum of the delta it follows in its chain; 0 when it applies to the base directly
 * @param seq its place in its chain, 1 or more
 */
public record DeltaId(long checksum, long baseChecksum, long baseSize, long prev, long seq) {
	/** The identity in a delta's header. */
	static DeltaId of(Header h) {
		return new DeltaId(h.checksum, h.baseChecksum, h.baseSize, h.prev, h.seq);
	}

	/**
	 * The identity in words, checksums in hex.
	 *
	 * @return "delta seq S (checksum C, prev P) of base B, N bytes", checksums as 16 hex digits
	 */
	@Override
	public String toString() {
		return "delta seq " + Long.toUnsignedString(seq) + " (checksum " + Bytes.hex(checksum) + ", prev "
				+ Bytes.hex(prev) + ") of base " + Bytes.hex(baseChecksum) + ", " + Long.toUnsignedString(baseSize)
				+ " bytes";
	}
}

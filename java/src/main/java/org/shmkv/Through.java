package org.shmkv;

/**
 * Reading a base image through a delta (FORMAT.md §19), or through a lower
 * and a top delta (§19.6): the checks of §19.4 that a delta applies to the
 * image it is read through, made once, before any get (for each of two
 * deltas against the base itself: a top is not a delta of the lower). The
 * reading itself is the readers' ({@link ShmkvReader}: the top's filter
 * and lookup, then the lower's, then the base's).
 */
final class Through {
	private Through() {}

	/**
	 * §19.4's table, in its order: base b a plain image and d a delta; d's
	 * base checksum and size b's; d not a later delta of a chain (prev 0);
	 * d's hash seed and width b's. Base (SHMKV_EBASE) otherwise, naming both
	 * checksums and, for a chain's later delta, its place.
	 */
	static void check(Image b, Image d) {
		check(b, d, "delta");
	}

	/** check, the delta named role in messages ("delta", "lower delta", "top delta"). */
	static void check(Image b, Image d, String role) {
		Header bh = b.hdr, dh = d.hdr;
		if (bh.delta)
			throw error(b, d, role, "the image is itself a delta; a delta applies to a plain image");
		if (!dh.delta)
			throw new ShmkvException.Base(b.source, d.source + ", given as the " + role + ", is a plain image (its "
					+ "layout hash is not a delta's); the base's header checksum is " + Bytes.hex(bh.checksum));
		if (dh.baseChecksum != bh.checksum || dh.baseSize != bh.fileSize)
			throw error(b, d, role, "it was made for another image");
		if (dh.prev != 0)
			throw error(b, d, role, "it follows delta " + Bytes.hex(dh.prev) + ", as number "
					+ Long.toUnsignedString(dh.seq) + " of its chain: chains are merged before they are read "
					+ "('shmctl image apply')");
		if (dh.hashSeed != bh.hashSeed || dh.hashBits != bh.hashBits)
			throw error(b, d, role, "it hashes keys with seed " + Bytes.hex(dh.hashSeed) + " and " + dh.hashBits
					+ " bits, the image with seed " + Bytes.hex(bh.hashSeed) + " and " + bh.hashBits);
		// the same seed and width: a key hashed once serves every lookup
	}

	private static ShmkvException.Base error(Image b, Image d, String role, String why) {
		Header bh = b.hdr, dh = d.hdr;
		return new ShmkvException.Base(b.source, role + " " + d.source + ": " + why + " (its header names base checksum "
				+ Bytes.hex(dh.baseChecksum) + ", " + Long.toUnsignedString(dh.baseSize) + " bytes; this image's "
				+ "header checksum is " + Bytes.hex(bh.checksum) + ", " + bh.fileSize + " bytes)");
	}
}

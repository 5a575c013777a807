package org.shmkv;

/**
 * The one part of the format that differs between versions: where a key's
 * entry is found from its hash. Format v1's buckets of 8 slot words are
 * {@link IndexV1}; v2's 128-byte buckets (layout B) are {@link IndexV2}
 * (FORMAT.md §17); header, sections, hash, tags, entries, values, protocol
 * and views are shared.
 */
interface Index {
	/**
	 * The locator (Image.locate) of key[0, len) with hash h (FORMAT.md §5),
	 * or -1 when the key is not there; key null: the key is packed in lo
	 * and hi (Keys), compared by Bytes.equal. Checks every offset it follows
	 * (§12.1): a damaged path is {@link ShmkvException.Corrupt}, never a read
	 * outside the image.
	 */
	long find(Image im, byte[] key, long lo, long hi, int len, long h);

	/** The index part of the full structural check (§13 step 3); returns the largest displacement seen. */
	void verify(Image im);
}

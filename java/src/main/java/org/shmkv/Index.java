package org.shmkv;

/**
 * The one part of the format that differs between versions: where a key's
 * entry is found from its hash. Format v1's buckets of 8 slot words are
 * {@link IndexV1}; v2's two-line buckets will be a second implementation
 * (FORMAT.md §17); header, sections, hash, tags, entries, values, protocol
 * and views are shared.
 */
interface Index {
	/**
	 * The image offset of the entry of key[0, len) with hash h (FORMAT.md §5),
	 * or -1 when the key is not there. Checks every offset it follows
	 * (§12.1): a damaged path is {@link ShmkvException.Corrupt}, never a read
	 * outside the image.
	 */
	long find(Image im, byte[] key, int len, long h);

	/** The index part of the full structural check (§13 step 3); returns the largest displacement seen. */
	void verify(Image im);
}

package org.shmkv;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * A coverage-guided fuzz target over image bytes (Jazzer). The input picks
 * a seed image (FuzzTest's: the vectors' and the test-only writer's, a
 * delta among them) and overwrites bytes of it where it says, or (its first
 * byte odd) is itself the whole image; the same byte says whether the
 * image is read alone or (FORMAT.md §19) as a delta through the delta
 * seed's base. Then, as FuzzTest: opened at a check level, iterated, looked
 * up, verified, and only ShmkvExceptions from the reader's own checks may
 * come out. Regression mode (every mvn verify) runs the inputs under
 * src/test/resources/org/shmkv/JazzerFuzzTestInputs; JAZZER_FUZZ=1 fuzzes
 * (java/README.md, "Tests").
 */
class JazzerFuzzTest {
	private static List<byte[]> images;
	private static List<List<byte[]>> keys;
	/** The delta seed's base, and the keys of both. */
	private static byte[] base;
	private static List<byte[]> throughKeys;

	private static synchronized void load() throws Exception {
		if (images != null)
			return;
		List<byte[]> im = new ArrayList<>();
		List<List<byte[]>> ks = new ArrayList<>();
		for (String n : FuzzTest.SEEDS) {
			byte[] b = FuzzTest.seed(n);
			List<byte[]> k = new ArrayList<>();
			try (Shmkv db = Shmkv.of(b, Shmkv.Check.DEEP)) {
				long i = 0, step = Math.max(1, db.size() / 48); // at most ~48 keys a seed: executions stay fast
				for (Value v : db)
					if (i++ % step == 0)
						k.add(v.key());
			}
			im.add(b);
			ks.add(k);
		}
		base = FuzzTest.deltaBase();
		throughKeys = FuzzTest.throughKeys(base, FuzzTest.keys(FuzzTest.seed(FuzzTest.DELTA)));
		keys = ks;
		images = im;
	}

	/** The short run: `mvn -Pfuzz verify` (60 s of fuzzing), and the regression inputs in every verify. */
	@com.code_intelligence.jazzer.junit.FuzzTest(maxDuration = "60s")
	void images(FuzzedDataProvider in) throws Exception {
		target(in);
	}

	/** The longer run (java/README.md): `mvn -Pfuzz -Dshmkv.fuzz.test=JazzerFuzzTest#imagesLong verify`, 10 minutes. */
	@com.code_intelligence.jazzer.junit.FuzzTest(maxDuration = "10m")
	void imagesLong(FuzzedDataProvider in) throws Exception {
		target(in);
	}

	/**
	 * The mode byte: bit 0 the whole image from the input, else a seed's
	 * damaged copy; (mode >> 1) % seeds the seed (the keys looked up);
	 * (mode >> 1) / seeds odd, the image read as a delta through the delta
	 * seed's base (a single byte 0x26 is the intact delta read through it).
	 */
	static void target(FuzzedDataProvider in) throws Exception {
		load();
		int mode = in.consumeByte() & 0xFF;
		boolean through = (mode >>> 1) / images.size() % 2 == 1;
		byte[] img;
		List<byte[]> k;
		if ((mode & 1) == 1) {
			img = in.consumeRemainingAsBytes();
			k = keys.get((mode >>> 1) % keys.size());
		} else {
			int which = (mode >>> 1) % images.size();
			img = images.get(which).clone();
			k = keys.get(which);
			int n = in.consumeInt(1, 16);
			for (int i = 0; i < n && in.remainingBytes() > 0; i++) {
				int at = in.consumeBoolean() ? in.consumeInt(0, Math.min(img.length - 1, 8191))
						: in.consumeInt(0, img.length - 1);
				img[at] = in.consumeByte();
			}
			if (in.consumeBoolean() && img.length >= 4096)
				FuzzTest.resum(img);
		}
		if (through)
			FuzzTest.exerciseThrough(base, img, null, throughKeys, new SplittableRandom(mode));
		else
			FuzzTest.exercise(img, k, new SplittableRandom(mode));
	}
}

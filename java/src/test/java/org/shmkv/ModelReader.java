package org.shmkv;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.zip.CRC32;

/**
 * Not a test: the Java reader of the writes model test
 * (tests/model/README.md), run by its driver with the test class path. A
 * Shmkv attached to a cache served by shmkv-loader for the whole run
 * answers the driver's commands on stdin, one reply line each
 * (tests/model/model_reader.c has the list): keys, check GEN MS, iter, dump,
 * dumpiter, quit. A check takes a Snapshot: its gets, getAll and expiries,
 * and the iter after it, read that one generation.
 */
final class ModelReader {
	private static final HexFormat HEX = HexFormat.of();

	private final String name;
	private final Path root;
	private Shmkv cache;
	private Snapshot snap; // pinned by the last check
	private byte[][] keys = new byte[0][];
	private final List<String> answers = new ArrayList<>(); // dump's tokens
	private final List<byte[][]> entries = new ArrayList<>(); // key, value, expiry (text)

	private ModelReader(Path root, String name) {
		this.root = root;
		this.name = name;
	}

	/** LEN:BYTES, as the driver hashes it. */
	private static void field(CRC32 crc, byte[] b) {
		crc.update((b.length + ":").getBytes(StandardCharsets.US_ASCII));
		crc.update(b);
	}

	/** Refreshes (attaching again after Stale) until the generation is at least gen, for ms at most. */
	private void follow(long gen, long ms) throws InterruptedException {
		long end = System.nanoTime() + ms * 1_000_000L;
		String last = "";
		for (;;) {
			try {
				if (cache == null)
					cache = Shmkv.attach(name, root, Shmkv.Check.HEADER);
				else
					cache.refresh();
			} catch (ShmkvException.Stale e) { // the protocol 1 file retired: attach again
				cache.close();
				cache = null;
				continue;
			} catch (ShmkvException e) { // mid-publish, or a generation that did not map
				last = e.toString();
			}
			if (cache != null && cache.generation() >= gen)
				return;
			if (System.nanoTime() > end)
				throw new IllegalStateException("no generation " + gen + " within " + ms + " ms (at "
						+ (cache == null ? 0 : cache.generation()) + "): " + last);
			Thread.sleep(1);
		}
	}

	private String check(long gen, long ms) throws InterruptedException {
		if (snap != null) {
			snap.close();
			snap = null;
		}
		follow(gen, ms);
		snap = cache.snapshot();
		Value[] batch = snap.getAll(keys);
		CRC32 crc = new CRC32();
		int present = 0;
		answers.clear();
		for (int i = 0; i < keys.length; i++) {
			Value v = snap.get(keys[i]);
			if ((v == null) != (batch[i] == null) || v != null && !Arrays.equals(v.toBytes(), batch[i].toBytes()))
				throw new IllegalStateException("key " + i + ": getAll answers " + batch[i] + ", get " + v);
			if (v == null) {
				answers.add("-");
				crc.update("-\n".getBytes(StandardCharsets.US_ASCII));
				continue;
			}
			if (v.type() != ValueType.STRING)
				throw new IllegalStateException("key " + i + ": " + v.type() + ", not a string");
			byte[] b = v.asString().getBytes(StandardCharsets.UTF_8);
			long exp = v.expires();
			answers.add(HEX.formatHex(b) + "," + exp);
			field(crc, b);
			crc.update(("," + exp + "\n").getBytes(StandardCharsets.US_ASCII));
			present++;
		}
		return "ok " + snap.generation() + " " + String.format("%08x", crc.getValue()) + " " + present;
	}

	private String iterate() {
		if (snap == null)
			throw new IllegalStateException("iter before check");
		entries.clear();
		for (Value v : snap) {
			if (v.type() != ValueType.STRING)
				throw new IllegalStateException("iteration: " + v.type() + ", not a string");
			entries.add(new byte[][] {v.key(), v.asString().getBytes(StandardCharsets.UTF_8),
					Long.toString(v.expires()).getBytes(StandardCharsets.US_ASCII)});
		}
		entries.sort((a, b) -> Arrays.compareUnsigned(a[0], b[0]));
		CRC32 crc = new CRC32();
		for (int i = 0; i < entries.size(); i++) {
			byte[][] e = entries.get(i);
			if (i > 0 && Arrays.equals(entries.get(i - 1)[0], e[0]))
				throw new IllegalStateException("iteration yields a key twice");
			field(crc, e[0]);
			field(crc, e[1]);
			crc.update(',');
			crc.update(e[2]);
			crc.update('\n');
		}
		if (snap.size() != entries.size())
			throw new IllegalStateException("size() " + snap.size() + ", the iteration " + entries.size());
		return "ok " + snap.generation() + " " + String.format("%08x", crc.getValue()) + " " + entries.size();
	}

	private long generation() {
		return snap == null ? 0 : snap.generation();
	}

	private String dump() {
		StringBuilder b = new StringBuilder("ok " + generation());
		for (String a : answers)
			b.append(' ').append(a);
		return b.toString();
	}

	private String dumpiter() {
		StringBuilder b = new StringBuilder("ok " + generation());
		for (byte[][] e : entries)
			b.append(' ').append(HEX.formatHex(e[0])).append(',').append(HEX.formatHex(e[1])).append(',')
					.append(new String(e[2], StandardCharsets.US_ASCII));
		return b.toString();
	}

	private String command(String[] w) throws InterruptedException {
		if (w.length >= 1 && w[0].equals("keys")) {
			keys = new byte[w.length - 1][];
			for (int i = 1; i < w.length; i++)
				keys[i - 1] = HEX.parseHex(w[i]);
			return "ok " + keys.length;
		}
		if (w.length == 3 && w[0].equals("check"))
			return check(Long.parseLong(w[1]), Long.parseLong(w[2]));
		if (w.length == 1 && w[0].equals("iter"))
			return iterate();
		if (w.length == 1 && w[0].equals("dump"))
			return dump();
		if (w.length == 1 && w[0].equals("dumpiter"))
			return dumpiter();
		throw new IllegalArgumentException("unknown command " + String.join(" ", w));
	}

	public static void main(String[] args) throws Exception {
		if (args.length != 2) {
			System.err.println("usage: ModelReader ROOT CACHE (commands on stdin: tests/model/README.md)");
			System.exit(2);
		}
		ModelReader r = new ModelReader(Path.of(args[0]), args[1]);
		BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 20);
		BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 20);
		for (String line; (line = in.readLine()) != null;) {
			String[] w = line.trim().isEmpty() ? new String[0] : line.trim().split(" +");
			if (w.length == 1 && w[0].equals("quit"))
				break;
			String reply;
			try {
				reply = r.command(w);
			} catch (RuntimeException e) {
				reply = ("error " + e).replace('\n', ' ');
			}
			out.write(reply);
			out.write('\n');
			out.flush();
		}
		if (r.snap != null)
			r.snap.close();
		if (r.cache != null)
			r.cache.close();
	}
}

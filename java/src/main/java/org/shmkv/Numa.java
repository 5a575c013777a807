package org.shmkv;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.IntFunction;

/**
 * NUMA replicas (PROTOCOL.md, "Replicas"): which base copy a reader maps,
 * as the C reader (lib/shmkv/attach.h, shmkv__pick_segment) and the Go one
 * (go/numa.go) choose it: the copy pinned to the wanted node, else the
 * pinned copy nearest to it by the SLIT distances in sysfs, else the first.
 *
 * <p>The calling thread's node comes from libc's getcpu(3) through the FFM
 * linker ({@link Libc}: only where native access is enabled for this
 * code); elsewhere the node is unknown and the first copy is read.
 */
final class Numa {
	private Numa() {}

	private static final MethodHandle GETCPU = Libc.function("getcpu",
			FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS));

	/** Whether {@link #currentNode} can know the node in this JVM (native access enabled, Linux, libc's getcpu found). */
	static boolean known() {
		return GETCPU != null;
	}

	/**
	 * The NUMA node of the CPU the calling thread runs on at this instant,
	 * 0 to 63; -1 if unknown. The thread may move right after: this is the
	 * node at attach or refresh time, as in the C reader.
	 */
	static int currentNode() {
		if (GETCPU == null)
			return -1;
		try (Arena a = Arena.ofConfined()) {
			MemorySegment cpu = a.allocate(ValueLayout.JAVA_INT), node = a.allocate(ValueLayout.JAVA_INT);
			int r = (int) GETCPU.invokeExact(cpu, node);
			int n = node.get(ValueLayout.JAVA_INT, 0);
			return r == 0 && n >= 0 && n < 64 ? n : -1;
		} catch (Error e) { // the JVM's own trouble is not ours to hide
			throw e;
		} catch (Throwable t) { // unknown: the first copy
			return -1;
		}
	}

	/**
	 * The SLIT distance from node from to each of the 64 nodes
	 * (Integer.MAX_VALUE where unknown): sysfs's nodeF/distance lists one
	 * number per online node, in the order of node/online.
	 */
	static int[] distances(int from) {
		int[] dist = new int[64];
		Arrays.fill(dist, Integer.MAX_VALUE);
		Path sys = Path.of("/sys/devices/system/node");
		List<Integer> ids = new ArrayList<>();
		String[] line;
		try {
			for (String r : Files.readString(sys.resolve("online")).trim().split(",")) {
				int dash = r.indexOf('-');
				int lo = Integer.parseInt(dash < 0 ? r : r.substring(0, dash));
				int hi = dash < 0 ? lo : Integer.parseInt(r.substring(dash + 1));
				for (int i = lo; i <= hi && i >= 0 && i < 64; i++)
					ids.add(i);
			}
			line = Files.readString(sys.resolve("node" + from).resolve("distance")).trim().split("\\s+");
		} catch (IOException | RuntimeException e) { // no sysfs, or not what it should be: unknown
			return dist;
		}
		for (int i = 0; i < line.length && i < ids.size(); i++) {
			try {
				dist[ids.get(i)] = Integer.parseInt(line[i]);
			} catch (NumberFormatException e) {
				break;
			}
		}
		return dist;
	}

	/**
	 * Which of the base copies (their nodes, in control segment order; -1:
	 * not pinned) to map for node want (-1: unknown): the one pinned to
	 * want, else the pinned one nearest to want by distance (dist gives the
	 * distances from a node, {@link #distances} outside tests), else 0.
	 */
	static int pick(int[] nodes, int want, IntFunction<int[]> dist) {
		if (nodes.length <= 1 || want < 0 || want > 63)
			return 0;
		for (int i = 0; i < nodes.length; i++)
			if (nodes[i] == want)
				return i;
		int[] d = dist.apply(want);
		int best = 0, bestD = Integer.MAX_VALUE;
		for (int i = 0; i < nodes.length; i++)
			if (nodes[i] >= 0 && nodes[i] < 64 && d[nodes[i]] < bestD) {
				bestD = d[nodes[i]];
				best = i;
			}
		return best;
	}
}

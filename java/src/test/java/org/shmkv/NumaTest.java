package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * The base copy a reader maps for a node (Numa.pick, as the C reader's
 * shmkv__pick_segment and Go's pickSegment), over made-up distances, and
 * this machine's node and distances as getcpu and sysfs give them.
 */
class NumaTest {
	/** Distances of a 4-node machine: 0-1 and 2-3 near (12), across far (20, 30 to node 3 from 0). */
	static int[] slit(int from) {
		int[][] d = {{10, 12, 20, 30}, {12, 10, 20, 20}, {20, 20, 10, 12}, {30, 20, 12, 10}};
		int[] out = new int[64];
		Arrays.fill(out, Integer.MAX_VALUE);
		if (from < 4)
			System.arraycopy(d[from], 0, out, 0, 4);
		return out;
	}

	@Test
	void theNodesCopyElseTheNearestElseTheFirst() {
		int[] nodes = {2, 0, 3};
		assertEquals(1, Numa.pick(nodes, 0, NumaTest::slit), "pinned to the node");
		assertEquals(2, Numa.pick(nodes, 3, NumaTest::slit));
		assertEquals(1, Numa.pick(nodes, 1, NumaTest::slit), "node 1: node 0's copy is nearest (12)");
		assertEquals(1, Numa.pick(new int[] {3, 2}, 0, NumaTest::slit), "node 0: node 2's copy (20) before node 3's (30)");
		assertEquals(1, Numa.pick(new int[] {-1, 2}, 0, NumaTest::slit), "an unpinned copy is no node's");
		assertEquals(0, Numa.pick(new int[] {-1, 5}, 0, NumaTest::slit), "no distance known: the first");
		assertEquals(0, Numa.pick(nodes, -1, NumaTest::slit), "unknown node: the first");
		assertEquals(0, Numa.pick(nodes, 64, NumaTest::slit), "no such node: the first");
		assertEquals(0, Numa.pick(new int[] {3}, 0, NumaTest::slit), "one copy");
		assertEquals(0, Numa.pick(new int[] {}, 0, NumaTest::slit));
	}

	@Test
	void thisMachinesNode() {
		// native access is enabled for the tests (pom.xml): getcpu is found on Linux
		assertTrue(Numa.known());
		int n = Numa.currentNode();
		assertTrue(n >= 0 && n < 64, "node " + n);
		int[] d = Numa.distances(n);
		assertEquals(10, d[n], "a node's distance to itself (SLIT: 10), from sysfs");
		assertEquals(Integer.MAX_VALUE, Numa.distances(64)[0], "no such node: unknown");
	}
}

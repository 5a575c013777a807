package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A real shmkv-loader for a test (Programs finds it and shmctl): its root,
 * spool and segment directory under the test's temporary directory (the
 * segments in /dev/shm), started in the foreground and stopped with
 * SIGTERM; shmctl run against its root. Every wait has a deadline of
 * 120 s: the tests hold on a loaded machine.
 */
final class LoaderProcess implements AutoCloseable {
	static final long DEADLINE_NS = TimeUnit.SECONDS.toNanos(120);

	final Path dir, root, spool, shm;
	private final Process loader;

	private LoaderProcess(Path dir, Path root, Path spool, Path shm, Process loader) {
		this.dir = dir;
		this.root = root;
		this.spool = spool;
		this.shm = shm;
		this.loader = loader;
	}

	/** Starts a loader under dir; returns once its control socket exists. */
	static LoaderProcess start(Path dir) throws Exception {
		Path exe = Programs.loader();
		Programs.shmctl();
		Path root = Files.createDirectory(dir.resolve("root"));
		Path spool = Files.createDirectory(dir.resolve("spool"));
		Path shm = Files.createTempDirectory(Path.of("/dev/shm"), "shmkv-java-");
		for (Path d : List.of(dir, root, spool, shm))
			Files.setPosixFilePermissions(d, PosixFilePermissions.fromString("rwxr-xr-x"));
		Process p = new ProcessBuilder(exe.toString(), "--root", root.toString(), "--spool", spool.toString(),
				"--shm-dir", shm.toString(), "--memory", "shm", "--foreground")
				.redirectErrorStream(true).redirectOutput(dir.resolve("loader.log").toFile()).start();
		LoaderProcess ld = new LoaderProcess(dir, root, spool, shm, p);
		long end = System.nanoTime() + DEADLINE_NS;
		while (!Files.exists(root.resolve("control.sock"))) {
			assertTrue(p.isAlive(), "the loader exited: " + ld.log());
			assertTrue(System.nanoTime() < end, "the loader did not start in 120 s: " + ld.log());
			Thread.sleep(20);
		}
		return ld;
	}

	String log() {
		try {
			return Files.readString(dir.resolve("loader.log"));
		} catch (Exception e) {
			return "(no log)";
		}
	}

	/** shmctl -r ROOT args...: its output; fails the test unless it exits 0 within 120 s. */
	String shmctl(String... args) throws Exception {
		List<String> cmd = new ArrayList<>(List.of(Programs.shmctl().toString(), "-r", root.toString()));
		cmd.addAll(List.of(args));
		Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
		String out = new String(p.getInputStream().readAllBytes());
		assertTrue(p.waitFor(120, TimeUnit.SECONDS), "shmctl " + String.join(" ", args) + ": still running");
		assertEquals(0, p.exitValue(), "shmctl " + String.join(" ", args) + ": " + out + "\nloader: " + log());
		return out;
	}

	/** Attaches to cache name, waiting (up to 120 s) while it does not exist or has nothing published. */
	Shmkv attachWhenReady(String name) throws Exception {
		long end = System.nanoTime() + DEADLINE_NS;
		for (;;) {
			try {
				return Shmkv.attach(name, root, Shmkv.Check.HEADER);
			} catch (ShmkvException e) {
				if (!e.codeName().equals("ENOENT") && !e.codeName().equals("EAGAIN"))
					throw e;
			}
			assertTrue(System.nanoTime() < end, "not published in 120 s: " + log());
			Thread.sleep(10);
		}
	}

	/** Stops the loader (SIGTERM, then SIGKILL after 30 s) and removes its segment directory. */
	@Override
	public void close() throws IOException {
		loader.destroy(); // SIGTERM
		try {
			if (!loader.waitFor(30, TimeUnit.SECONDS))
				loader.destroyForcibly();
		} catch (InterruptedException e) {
			loader.destroyForcibly();
			Thread.currentThread().interrupt();
		}
		try (var s = Files.walk(shm)) {
			s.sorted((a, b) -> b.compareTo(a)).map(Path::toFile).forEach(File::delete);
		}
	}
}

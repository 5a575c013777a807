package org.shmkv;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * Programs of the C build for the tests: $SHMKV_SHMCTL and $SHMKV_LOADER
 * (./run test-java sets them), else the repository's build/ (a meson build
 * directory). Missing: the test skips with the reason, or fails under
 * SHMKV_REQUIRE_ALL=1 (CI).
 */
final class Programs {
	private Programs() {}

	/** The repository's root (the pom sets it; java/.. when run from java/). */
	static final Path REPO = Path.of(System.getProperty("shmkv.repo", ".."));

	static Path find(String var, String rel) {
		String p = System.getenv(var);
		Path path = p != null && !p.isEmpty() ? Path.of(p) : REPO.resolve("build").resolve(rel);
		if (Files.isExecutable(path))
			return path.toAbsolutePath();
		String why = "$" + var + " names no program and " + path + " does not exist (./run test-java builds "
				+ "build/ and sets it)";
		if ("1".equals(System.getenv("SHMKV_REQUIRE_ALL")))
			fail(why);
		Assumptions.abort(why);
		return null;
	}

	static Path shmctl() {
		return find("SHMKV_SHMCTL", "shmctl/shmctl");
	}

	static Path loader() {
		return find("SHMKV_LOADER", "loader/shmkv-loader");
	}

	/** Builds an image from JSONL lines with shmctl; options: more of image build's (--delta-of BASE). */
	static void build(Path out, String name, List<String> jsonl, String... options) throws Exception {
		Path in = Files.createTempFile(out.getParent(), "in", ".jsonl");
		Files.write(in, jsonl);
		List<String> cmd = new ArrayList<>(List.of(shmctl().toString(), "image", "build", "-o", out.toString(),
				"--name", name, "--created", "1700000000"));
		cmd.addAll(List.of(options));
		cmd.add(in.toString());
		Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
		String log = new String(p.getInputStream().readAllBytes());
		if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0)
			fail("shmctl image build failed: " + log);
		Files.delete(in);
	}
}

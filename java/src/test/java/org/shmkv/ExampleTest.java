package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The READMEs' first program is the example's, pasted as written: each
 * code block under a marker {@code <!-- PATH -->} is the file PATH (under
 * java/) byte for byte, and every file of java/example is shown.
 * (release-test.sh builds and runs the example with the commands the README
 * gives under {@code <!-- first-program-commands -->}.)
 */
class ExampleTest {
	static final Path JAVA = Programs.REPO.resolve("java");

	/** The code blocks of a README that follow a marker {@code <!-- PATH -->}: PATH, then the block's text. */
	static List<String[]> blocks(Path readme) throws Exception {
		List<String> lines = Files.readAllLines(readme);
		List<String[]> out = new ArrayList<>();
		for (int i = 0; i < lines.size(); i++) {
			String l = lines.get(i);
			if (!l.startsWith("<!-- ") || !l.endsWith(" -->") || !l.contains("/"))
				continue;
			String path = l.substring(5, l.length() - 4);
			assertTrue(lines.get(i + 1).startsWith("```"), readme + ": a code block follows " + l);
			StringBuilder b = new StringBuilder();
			int j = i + 2;
			for (; !lines.get(j).equals("```"); j++)
				b.append(lines.get(j)).append('\n');
			out.add(new String[] {path, b.toString()});
			i = j;
		}
		return out;
	}

	@Test
	void theJavaReadmesFirstProgramIsTheExample() throws Exception {
		List<String[]> b = blocks(JAVA.resolve("README.md"));
		List<String> shown = new ArrayList<>();
		for (String[] block : b) {
			assertEquals(Files.readString(JAVA.resolve(block[0])), block[1], "README.md's " + block[0]);
			shown.add(block[0]);
		}
		assertEquals(List.of("example/pom.xml", "example/src/main/java/FirstRead.java"), shown,
				"every file of the example, in README.md");
		try (var files = Files.walk(JAVA.resolve("example"))) {
			List<String> all = new ArrayList<>();
			files.filter(Files::isRegularFile).map(p -> JAVA.relativize(p).toString())
					.filter(p -> !p.startsWith("example/target/") && !p.equals("example/users.shmkv")
							&& !p.equals("example/.gitignore") && !p.equals("example/.mvn/jvm.config"))
					.sorted().forEach(all::add);
			assertEquals(shown, all, "the example's files are the README's");
		}
	}

	@Test
	void theTopLevelReadmesJavaIsTheExample() throws Exception {
		List<String[]> b = blocks(Programs.REPO.resolve("README.md"));
		boolean found = false;
		for (String[] block : b)
			if (block[0].startsWith("java/")) {
				assertEquals(Files.readString(Programs.REPO.resolve(block[0])), block[1], "README.md's " + block[0]);
				found |= block[0].equals("java/example/src/main/java/FirstRead.java");
			}
		assertTrue(found, "README.md's \"Read it from Java\" shows java/example's FirstRead.java");
	}
}

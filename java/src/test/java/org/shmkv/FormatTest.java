package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Format.java against lib/format.json, the format's machine-readable
 * description: every constant, each way (a constant here that the file
 * lacks fails as a value there that Format lacks), the layout hash the
 * reader's own XXH3 makes of the layout description, the type table, the
 * error codes, the retired version's message, and delta images' constants
 * (FORMAT.md §19): their layout hash and description, flag, section count,
 * reserved words, tombstone kinds and filter.
 */
class FormatTest {
	static final Path JSON = Programs.REPO.resolve("lib/format.json");
	static JsonNode f;

	@BeforeAll
	static void read() throws Exception {
		f = new ObjectMapper().readTree(Files.readAllBytes(JSON));
	}

	/** A static int or long constant of Format by name. */
	static long constant(String name) throws Exception {
		Field c = Format.class.getDeclaredField(name);
		return ((Number) c.get(null)).longValue();
	}

	/** The names of Format's int and long constants that start with prefix. */
	static Set<String> constants(String prefix) {
		Set<String> out = new TreeSet<>();
		for (Field c : Format.class.getDeclaredFields())
			if (Modifier.isStatic(c.getModifiers()) && c.getName().startsWith(prefix)
					&& (c.getType() == int.class || c.getType() == long.class))
				out.add(c.getName());
		return out;
	}

	static long hex(JsonNode n) {
		return Long.parseUnsignedLong(n.asText().replaceFirst("^0x", ""), 16);
	}

	/** Each field of the object o is the constant prefix + its name in capitals, and Format has no other. */
	static void fields(JsonNode o, String prefix) throws Exception {
		Set<String> seen = new TreeSet<>();
		for (Map.Entry<String, JsonNode> e : o.properties()) {
			String name = prefix + e.getKey().toUpperCase(java.util.Locale.ROOT);
			assertEquals(e.getValue().asLong(), constant(name), name);
			seen.add(name);
		}
		assertEquals(seen, constants(prefix), "Format's " + prefix + "* constants against format.json's");
	}

	/** Each field of o against the constant the map names for it, every field of o named. */
	static void named(JsonNode o, Map<String, String> names) throws Exception {
		List<String> keys = new ArrayList<>();
		o.fieldNames().forEachRemaining(keys::add);
		assertEquals(new TreeSet<>(names.keySet()), new TreeSet<>(keys), "the fields of " + o);
		for (Map.Entry<String, String> n : names.entrySet())
			assertEquals(o.get(n.getKey()).asLong(), constant(n.getValue()), n.getKey() + " (" + n.getValue() + ")");
	}

	static Map<String, String> map(String... kv) {
		Map<String, String> m = new LinkedHashMap<>();
		for (int i = 0; i < kv.length; i += 2)
			m.put(kv[i], kv[i + 1]);
		return m;
	}

	@Test
	void everyPartOfTheFileIsChecked() {
		Set<String> parts = new TreeSet<>();
		f.fieldNames().forEachRemaining(parts::add);
		assertEquals(new TreeSet<>(List.of("about", "magic", "format_version", "layout_hash", "layout_desc",
				"delta_layout_hash", "delta_layout_desc", "delta", "retired_versions", "header", "section",
				"section_kinds", "entry", "header_flags", "entry_flags", "bucket", "record", "limits", "types", "errors",
				"messages")), parts,
				"format.json's parts: a new one needs its check here");
	}

	@Test
	void versionLayoutAndItsHash() {
		assertEquals(f.get("magic").asText(), Format.MAGIC);
		assertEquals(f.get("format_version").asInt(), Format.VERSION);
		assertEquals(hex(f.get("layout_hash")), Format.LAYOUT_HASH);
		assertEquals(f.get("layout_desc").asText(), Format.LAYOUT_DESC);
		byte[] desc = Format.LAYOUT_DESC.getBytes(StandardCharsets.US_ASCII);
		assertEquals(Format.LAYOUT_HASH, Xxh3.checksum(MemorySegment.ofArray(desc), 0, desc.length),
				"the reader's XXH3 of the layout description is the layout hash");
	}

	@Test
	void deltaLayoutAndItsHash() {
		assertEquals(hex(f.get("delta_layout_hash")), Format.DELTA_LAYOUT_HASH);
		assertEquals(f.get("delta_layout_desc").asText(), Format.DELTA_LAYOUT_DESC);
		byte[] desc = Format.DELTA_LAYOUT_DESC.getBytes(StandardCharsets.US_ASCII);
		assertEquals(1362, desc.length, "FORMAT.md §19.1: 1362 ASCII bytes");
		assertEquals(Format.DELTA_LAYOUT_HASH, Xxh3.checksum(MemorySegment.ofArray(desc), 0, desc.length),
				"the reader's XXH3 of the delta layout description is the delta layout hash");
		assertNotEquals(Format.LAYOUT_HASH, Format.DELTA_LAYOUT_HASH);
	}

	/**
	 * format.json's "delta" each way: every field is a Format constant of
	 * that value, and every Format constant of a delta (its flag, section
	 * count, reserved words, tombstone kinds, filter) is a field.
	 */
	@Test
	void deltaConstants() throws Exception {
		JsonNode d = f.get("delta");
		named(((com.fasterxml.jackson.databind.node.ObjectNode) d.deepCopy()).without(List.of("reserved",
				"filter_shifts")), map("header_flag", "FLAG_DELTA", "section_count", "DELTA_SECTION_COUNT",
						"record_tomb", "K_TOMB", "inline_tomb_kind", "INLINE_TOMB", "out_tomb_kind", "OUT_TOMB",
						"tomb_entry_type", "TOMB_ENTRY_TYPE", "filter_section", "KIND_FILTER"));
		fields(d.get("reserved"), "D_");
		assertEquals(d.get("reserved").size(), Format.DELTA_WORDS, "the reserved words a delta names");
		JsonNode shifts = d.get("filter_shifts");
		Set<String> seen = new TreeSet<>();
		for (int i = 0; i < shifts.size(); i++) {
			assertEquals(shifts.get(i).asLong(), constant("FILTER_SHIFT_" + i), "filter_shifts[" + i + "]");
			seen.add("FILTER_SHIFT_" + i);
		}
		assertEquals(seen, constants("FILTER_SHIFT_"), "Format's filter shifts against format.json's");
		assertEquals(Format.HEADER_FLAGS | Format.FLAG_DELTA, Format.DELTA_HEADER_FLAGS, "a delta's known flags");
		assertEquals(Format.K_OUT | Format.K_TOMB, Format.OUT_TOMB);
		assertEquals("filter", Format.KIND_NAMES[Format.KIND_FILTER]);
		// the delta's words lie in the header's reserved[], which has RESERVED_WORDS of them
		assertEquals(Format.H_HEADER_CHECKSUM - Format.H_RESERVED, 8 * Format.RESERVED_WORDS);
		// the constants no part of format.json names, each accounted for above
		Set<String> deltaNamed = new TreeSet<>(List.of("FLAG_DELTA", "DELTA_HEADER_FLAGS", "DELTA_SECTION_COUNT",
				"DELTA_WORDS", "DELTA_LAYOUT_HASH", "RESERVED_WORDS", "K_TOMB", "INLINE_TOMB", "OUT_TOMB",
				"TOMB_ENTRY_TYPE", "KIND_FILTER"));
		for (String c : constants(""))
			if (c.contains("DELTA") || c.contains("TOMB") || c.contains("FILTER_SHIFT"))
				assertTrue(deltaNamed.contains(c) || c.startsWith("FILTER_SHIFT_"), c + " is checked against format.json");
	}

	/**
	 * Ctl's constants against lib/shmkv/protocol.h, the control segment's
	 * owner (format.json describes images, not the control segment): each
	 * protocol version's layout hash is the XXH3 of its description there,
	 * and lib/PROTOCOL.md quotes the same description of version 2 and
	 * names both pairs (version, hash) readers take.
	 */
	@Test
	void controlSegmentConstants() throws Exception {
		String h = Files.readString(Programs.REPO.resolve("lib/shmkv/protocol.h"));
		Map<String, String> d = new LinkedHashMap<>();
		java.util.regex.Matcher m = java.util.regex.Pattern.compile("#define (SHMKV_\\w+)[ \\t]+((?:[^\\n]*\\\\\\n)*[^\\n]*)")
				.matcher(h);
		while (m.find())
			d.put(m.group(1), m.group(2).replaceAll("/\\*.*?(\\*/|$)", "").replaceAll("\"\\s*\\\\\\n\\s*\"", "")
					.replaceAll("\\s*\\\\\\n\\s*", " ").trim());
		Map<String, Long> want = new LinkedHashMap<>();
		want.put("SHMKV_PROTOCOL_VERSION", (long) Ctl.PROTOCOL_1);
		want.put("SHMKV_PROTOCOL_VERSION_2", (long) Ctl.PROTOCOL_2);
		want.put("SHMKV_CTL_SIZE", Ctl.SIZE);
		want.put("SHMKV_CTL_MAX_SEGMENTS", (long) Ctl.MAX_SEGMENTS);
		want.put("SHMKV_CTL_PATH_MAX", (long) Ctl.PATH_MAX);
		want.put("SHMKV_CTL_RETIRED", (long) Ctl.RETIRED);
		want.put("SHMKV_SEG_HUGETLB", (long) Ctl.SEG_HUGETLB);
		want.put("SHMKV_SEG_OVERLAY", (long) Ctl.SEG_OVERLAY);
		want.put("SHMKV_SEG_TOP", (long) Ctl.SEG_TOP);
		want.put("SHMKV_CTL_LAYOUT_HASH", Ctl.LAYOUT_HASH);
		want.put("SHMKV_CTL_LAYOUT_HASH_V2", Ctl.LAYOUT_HASH_V2);
		for (Map.Entry<String, Long> w : want.entrySet()) {
			String v = d.get(w.getKey());
			assertNotNull(v, w.getKey() + " in protocol.h");
			v = v.replaceFirst("^UINT64_C\\((.*)\\)$", "$1").replaceFirst("u$", "");
			assertEquals(w.getValue(), v.startsWith("0x") ? Long.parseUnsignedLong(v.substring(2), 16) : Long.parseLong(v),
					w.getKey());
		}
		assertEquals("(SHMKV_SEG_HUGETLB | SHMKV_SEG_OVERLAY | SHMKV_SEG_TOP)", d.get("SHMKV_SEG_KNOWN_V2"));
		assertEquals(Ctl.SEG_HUGETLB | Ctl.SEG_OVERLAY | Ctl.SEG_TOP, Ctl.SEG_KNOWN_V2);
		assertEquals("SHMKV_SEG_HUGETLB", d.get("SHMKV_SEG_KNOWN_V1"));
		assertEquals(Ctl.SEG_HUGETLB, Ctl.SEG_KNOWN_V1);
		assertEquals(2176, Ctl.WORDS * 8, "the words a snapshot copies: 2176 bytes");
		String v1 = unquote(d.get("SHMKV_CTL_LAYOUT_DESC")), v2 = unquote(d.get("SHMKV_CTL_LAYOUT_DESC_V2"));
		assertTrue(v1.startsWith("shmkv-ctl-v1;ctl=2176:"), v1);
		assertEquals(444, v2.length(), "PROTOCOL.md: 444 ASCII bytes");
		for (String[] dh : new String[][] {{v1, "SHMKV_CTL_LAYOUT_HASH"}, {v2, "SHMKV_CTL_LAYOUT_HASH_V2"}}) {
			byte[] b = dh[0].getBytes(StandardCharsets.US_ASCII);
			assertEquals(want.get(dh[1]), Xxh3.checksum(MemorySegment.ofArray(b), 0, b.length), dh[1]);
		}
		String doc = Files.readString(Programs.REPO.resolve("lib/PROTOCOL.md"));
		assertTrue(doc.contains("\n" + v2 + "\n"), "PROTOCOL.md quotes version 2's description");
		assertTrue(doc.contains("(1, `0x" + String.format("%016x", Ctl.LAYOUT_HASH) + "`) or (2,\n`0x"
				+ String.format("%016x", Ctl.LAYOUT_HASH_V2) + "`)"), "PROTOCOL.md names both pairs");
	}

	/** A C string literal's text (adjacent literals already joined). */
	static String unquote(String lit) {
		assertNotNull(lit);
		assertTrue(lit.startsWith("\"") && lit.endsWith("\""), lit);
		return lit.substring(1, lit.length() - 1);
	}

	@Test
	void retiredVersion() {
		JsonNode r = f.get("retired_versions");
		assertEquals(1, r.size(), "one retired version");
		JsonNode v = r.get(Integer.toString(Format.RETIRED_VERSION));
		assertNotNull(v, "format " + Format.RETIRED_VERSION + " is the retired one");
		assertEquals(hex(v.get("layout_hash")), Format.RETIRED_LAYOUT_HASH);
		assertEquals(v.get("upgrade").asText(), Format.UPGRADE);
		assertEquals(f.get("messages").get("retired_version").asText(), Format.RETIRED_MESSAGE);
		assertEquals(1, f.get("messages").size(), "messages: the retired version's only");
	}

	@Test
	void headerSectionsAndEntries() throws Exception {
		JsonNode h = f.get("header");
		named(((com.fasterxml.jackson.databind.node.ObjectNode) h.deepCopy()).without("fields"),
				map("size", "HEADER_SIZE", "used", "HEADER_USED", "checksum_offset", "H_HEADER_CHECKSUM", "file_align",
						"FILE_ALIGN", "name_max", "NAME_MAX", "max_sections", "MAX_SECTIONS", "section_count",
						"SECTION_COUNT"));
		fields(h.get("fields"), "H_");
		assertEquals(f.get("section").get("size").asInt(), Format.SECTION_SIZE);
		fields(f.get("section").get("fields"), "S_");
		// section_kinds are a plain image's three; a delta's fourth, the filter, is delta.filter_section
		JsonNode kinds = ((com.fasterxml.jackson.databind.node.ObjectNode) f.get("section_kinds").deepCopy())
				.put("filter", f.get("delta").get("filter_section").asInt());
		fields(kinds, "KIND_");
		for (Map.Entry<String, JsonNode> e : kinds.properties())
			assertEquals(e.getKey(), Format.KIND_NAMES[e.getValue().asInt()]);
		assertEquals(kinds.size() + 1, Format.KIND_NAMES.length);
		assertEquals(f.get("section_kinds").size(), h.get("section_count").asInt(), "a plain image's sections");
		assertEquals(f.get("entry").get("size").asInt(), Format.ENTRY_SIZE);
		fields(f.get("entry").get("fields"), "E_");
	}

	@Test
	void flagsBucketsRecordsAndLimits() throws Exception {
		named(f.get("header_flags"), map("dedup", "FLAG_DEDUP", "expiry", "FLAG_EXPIRY"));
		assertEquals(Format.FLAG_DEDUP | Format.FLAG_EXPIRY, Format.HEADER_FLAGS, "every header flag known");
		named(f.get("entry_flags"), map("shared", "ENTRY_SHARED"));
		assertEquals(Format.ENTRY_SHARED, Format.ENTRY_FLAGS, "every entry flag known");
		named(f.get("bucket"), map("bytes", "BUCKET", "head", "HEAD", "filter_bits", "FILTER_BITS", "max_records",
				"MAX_RECORDS", "dir_bytes", "DIR_BYTES", "dir_off_mask", "DIR_OFF", "dir_tag_mask", "DIR_TAG",
				"dir_tag_shift", "DIR_TAG_SHIFT", "max_displacement_byte", "MAX_DISPLACEMENT_BYTE"));
		named(f.get("record"), map("type_mask", "K_TYPE", "expires", "K_EXPIRES", "out", "K_OUT", "known", "K_KNOWN",
				"inline_head", "INLINE_HEAD", "out_head", "OUT_HEAD", "expires_size", "EXPIRES_SIZE", "max_inline_len",
				"MAX_INLINE_LEN"));
		named(f.get("limits"), map("max_key_len", "MAX_KEY_LEN", "max_value_len", "MAX_VALUE_LEN", "max_image_size",
				"MAX_IMAGE_SIZE", "max_expires", "MAX_EXPIRES"));
	}

	@Test
	void typeTable() {
		JsonNode types = f.get("types");
		assertEquals(Format.MAX_TYPE, types.size());
		assertEquals(Format.MAX_TYPE + 1, ValueType.values().length, "the types and a delta's tombstone");
		assertEquals(ValueType.TOMBSTONE, ValueType.of(f.get("delta").get("tomb_entry_type").asInt()));
		assertEquals("tombstone", ValueType.TOMBSTONE.formatName());
		int aligned = 0, nul = 0, utf8 = 0, text = 0;
		for (JsonNode t : types) {
			int c = t.get("code").asInt();
			String what = "type " + c;
			assertTrue(Format.known(c), what);
			assertEquals(t.get("name").asText(), ValueType.of(c).formatName(), what);
			assertEquals(c, ValueType.of(c).code(), what);
			assertEquals(t.get("align").asInt(), Format.align(c), what);
			assertEquals(t.get("nul").asInt(), Format.nul(c), what);
			assertEquals(t.get("shape").asText(), Format.SHAPE_NAMES[Format.shape(c)], what);
			assertEquals(t.get("elem_size").asInt(), Format.elemSize(c), what);
			assertEquals(t.get("max_byte").asInt(), Format.maxByte(c), what);
			assertEquals(t.get("utf8").asBoolean(), Format.utf8(c), what);
			aligned |= t.get("align").asInt() == 8 ? 1 << c : 0;
			nul |= t.get("nul").asInt() == 1 ? 1 << c : 0;
			utf8 |= t.get("utf8").asBoolean() ? 1 << c : 0;
			text |= t.get("shape").asText().equals("text") ? 1 << c : 0;
		}
		assertFalse(Format.known(0));
		assertFalse(Format.known(Format.MAX_TYPE + 1));
		assertEquals(aligned, Format.ALIGNED, "the aligned types' mask");
		assertEquals(nul, Format.NUL_FOLLOWS, "the NUL types' mask");
		assertEquals(utf8, Format.UTF8, "the UTF-8 types' mask");
		assertEquals(text, Format.TEXT, "the text types' mask");
	}

	@Test
	void errorCodes() throws Exception {
		Set<String> seen = new TreeSet<>(), codes = new TreeSet<>();
		for (Map.Entry<String, JsonNode> e : f.get("errors").properties()) {
			assertEquals(e.getValue().asLong(), constant(e.getKey()), e.getKey());
			seen.add(e.getKey());
		}
		for (String c : constants("E"))
			if (c.matches("E[A-Z]+"))
				codes.add(c);
		assertEquals(seen, codes, "Format's error codes against format.json's");
	}
}

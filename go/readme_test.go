package shmkv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestREADMEFirstRead: go/README.md's "First read" works as written. Its
// program is example/main.go, byte for byte; its shell commands, run as
// they stand (the checkout's path put in their first line, and shmctl's
// where the build is elsewhere) in an empty directory, build a module
// that requires this one through a replace directive, build an image with
// shmctl and run the program on it; the program prints what the README
// says it prints. The Go commands run offline (GOPROXY=off): the modules
// come from the module cache, which building this package filled.
func TestREADMEFirstRead(t *testing.T) {
	shmctl := program(t, "SHMKV_SHMCTL", "shmctl/shmctl")
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command on PATH: %v", err) // go test puts its own first
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\n## First read\n")
	if !ok {
		t.Fatal(`README.md has no "## First read" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	sh, code, want := fenced(t, sec, "sh"), fenced(t, sec, "go"), fenced(t, sec, "text")
	main, err := os.ReadFile(filepath.Join("example", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if code != string(main) {
		t.Fatal("the README's first-read program is not example/main.go: copy the one into the other")
	}

	checkout, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(sh, "\n")
	if !strings.HasPrefix(lines[0], "shmkv=") {
		t.Fatalf("the commands' first line %q does not set shmkv, the checkout", lines[0])
	}
	lines[0] = "shmkv=" + strconv.Quote(checkout)
	script := strings.ReplaceAll(strings.Join(lines, "\n"), "$shmkv/build/shmctl/shmctl", strconv.Quote(shmctl))
	cmd := exec.Command("bash", "-euc", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the first read's commands: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	if !strings.HasSuffix(string(out), want) {
		t.Fatalf("the first read prints\n%s\nthe README says it prints\n%s", out, want)
	}
}

// fenced is the body of the first ```lang block of s.
func fenced(t *testing.T, s, lang string) string {
	t.Helper()
	_, body, ok := strings.Cut(s, "\n```"+lang+"\n")
	if !ok {
		t.Fatalf("no ```%s block", lang)
	}
	body, _, ok = strings.Cut(body, "\n```\n")
	if !ok {
		t.Fatalf("the ```%s block does not end", lang)
	}
	return body + "\n"
}

// TestREADMEDelta: go/README.md's "Reading through a delta" shows
// ExampleImage_WithDelta as it stands in example_delta_test.go (which go
// test runs, comparing what it prints with its Output), and what it prints.
func TestREADMEDelta(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\n## Reading through a delta\n")
	if !ok {
		t.Fatal(`README.md has no "## Reading through a delta" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	code, printed := fenced(t, sec, "go"), fenced(t, sec, "text")
	ex, err := os.ReadFile("example_delta_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(code, "func ExampleImage_WithDelta() {\n") || !strings.Contains(string(ex), "\n"+code) {
		t.Fatal("the README's delta example is not ExampleImage_WithDelta of example_delta_test.go: copy the one into the other")
	}
	_, out, _ := strings.Cut(code, "\t// Output:\n")
	var want strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(out, "}\n"), "\n") {
		if l = strings.TrimPrefix(l, "\t// "); l != "" {
			want.WriteString(l + "\n")
		}
	}
	if printed != want.String() {
		t.Fatalf("the README says the example prints\n%s\nits Output is\n%s", printed, want.String())
	}
}

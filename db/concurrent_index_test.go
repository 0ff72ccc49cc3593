package db_test

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/ilinkflow/ilinkflow/db"
)

// growingTables are the tables whose rows are written per message or per send, or per
// event of an audit (kept for good): the tables that are large on a busy installation.
// A plain CREATE INDEX (or REINDEX) holds off every write to its table until the build
// ends, which on one of these stalls the traffic for as long as the build takes, so an
// index on one of them that existed before the migration is built with CONCURRENTLY, in
// a NO TRANSACTION migration. Add a new table of that kind here; a table whose name ends
// in _audit, _log or _logs (an audit trail, a reveal log) counts as growing without it.
var growingTables = map[string]string{
	"inbound_messages":     "a row per message received, kept for the retention horizon (months)",
	"inbound_images":       "a row per media attachment of a message received",
	"reply_windows":        "a row per message answered (its reply window)",
	"reply_window_secrets": "a row per reply window (its sealed context token)",
	"agent_sessions":       "a row per message handed to an agent",
	"send_attempts":        "a row per reply sent, kept for the retention horizon (months)",
	"held_replies":         "a row per reply held for a later window, kept as its audit record",
	"outbound_media":       "a row per media reply (deleted after expiry, but as many as the traffic)",
	"mcp_offers":           "a row per message handed to an MCP agent",
	"quarantined_pages":    "the quarantine: a row per page, or messages of a page, the store could not take; kept as the audit record",
	"enrollment_audit":     "the account audit: a row per enrollment, kept for the audit horizon",
	"route_audit":          "the route audit: a row per change of a bot's route, kept for the audit horizon",
}

// growingTable says whether table grows with traffic, and why.
func growingTable(table string) (string, bool) {
	if why, ok := growingTables[table]; ok {
		return why, true
	}
	for _, suffix := range []string{"_audit", "_log", "_logs"} {
		if strings.HasSuffix(table, suffix) {
			return "an audit trail or log (its name ends in " + suffix + ")", true
		}
	}
	return "", false
}

// Every index built on a table that grows with traffic and existed before the migration
// is built concurrently (CREATE INDEX CONCURRENTLY, REINDEX ... CONCURRENTLY) in a NO
// TRANSACTION migration, and a concurrent build is named and IF NOT EXISTS, so the run
// can drop the invalid index a failed build left and the migration can run again. An
// index built in the migration that creates its table (on an empty table) needs neither.
func TestEveryIndexOnATableThatGrowsWithTrafficIsBuiltConcurrently(t *testing.T) {
	report, err := checkIndexBuilds(db.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range report.violations {
		t.Error(v)
	}
	// The check sees what it checks: the builds of 00017 (on the two largest tables, which
	// 00001 created) are among those it found concurrent.
	for _, want := range []string{"00017 inbound_messages", "00017 send_attempts"} {
		if !slices.Contains(report.concurrent, want) {
			t.Errorf("the check did not find the concurrent build %q; found %v", want, report.concurrent)
		}
	}
	// Every table named in the list exists in some migration (no stale entry).
	for _, table := range slices.Sorted(maps.Keys(growingTables)) {
		if _, ok := report.created[table]; !ok {
			t.Errorf("growingTables names %s, which no migration creates", table)
		}
	}
	t.Logf("%d index builds in %d migrations; concurrent on a growing table: %v", report.builds, report.files, report.concurrent)
}

// The check refuses what it is there to refuse: a plain index, or one built concurrently
// in a migration with a transaction, or a REINDEX, on a growing table, and accepts an
// index of a table created in the same migration or of a table that does not grow.
func TestTheIndexBuildCheckRefusesAPlainIndexOnAGrowingTable(t *testing.T) {
	cases := []struct {
		name, sql string
		refused   bool
	}{
		{"plain index", "-- +goose Up\nCREATE INDEX inbound_messages_by_peer_time ON inbound_messages (peer_id, created_at);\n", true},
		{"plain unique index, qualified", "-- +goose Up\nCREATE UNIQUE INDEX x ON public.send_attempts (client_message_id, created_at);\n", true},
		{"concurrent in a transaction", "-- +goose Up\nCREATE INDEX CONCURRENTLY IF NOT EXISTS x ON reply_windows (issued_at);\n", true},
		{"concurrent without IF NOT EXISTS", "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY x ON held_replies (created_at);\n", true},
		{"concurrent without a name", "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY ON held_replies (created_at);\n", true},
		{"reindex table", "-- +goose Up\nREINDEX TABLE inbound_messages;\n", true},
		{"reindex index", "-- +goose Up\nREINDEX INDEX inbound_messages_by_account_time;\n", true},
		{"reindex schema", "-- +goose NO TRANSACTION\n-- +goose Up\nREINDEX SCHEMA CONCURRENTLY public;\n", false},
		{"reindex database", "-- +goose Up\nREINDEX DATABASE ilinkflow;\n", true},
		{"unique constraint", "-- +goose Up\nALTER TABLE send_attempts ADD CONSTRAINT x UNIQUE (account_key, created_at);\n", true},
		{"unique constraint on a built index", "-- +goose Up\nALTER TABLE send_attempts ADD CONSTRAINT x UNIQUE USING INDEX x;\n", false},
		{"an audit table of a later migration", "-- +goose Up\nCREATE INDEX reveal_log_by_time ON reveal_log (created_at);\n", true},
		{"in a comment, a string or a function body", "-- +goose Up\n-- CREATE INDEX x ON inbound_messages (peer_id);\n" +
			"/* CREATE INDEX x ON inbound_messages (peer_id); */\nSELECT 'CREATE INDEX x ON inbound_messages (peer_id);';\n" +
			"-- +goose StatementBegin\nCREATE FUNCTION f() RETURNS void LANGUAGE sql AS $$ SELECT 1 $$;\n-- +goose StatementEnd\n", false},
		{"concurrent, no transaction", "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY IF NOT EXISTS x ON inbound_messages (peer_id);\n-- +goose Down\nDROP INDEX CONCURRENTLY IF EXISTS x;\n", false},
		{"reindex concurrently", "-- +goose NO TRANSACTION\n-- +goose Up\nREINDEX (VERBOSE) INDEX CONCURRENTLY inbound_messages_by_peer;\n", false},
		{"a table that does not grow", "-- +goose Up\nCREATE INDEX x ON accounts (created_at);\n", false},
		{"a table of the same migration", "-- +goose Up\nCREATE TABLE reveal_log (id bigint PRIMARY KEY, created_at timestamptz);\nCREATE INDEX x ON reveal_log (created_at);\n", false},
		{"in the Down section", "-- +goose Up\nSELECT 1;\n-- +goose Down\nCREATE INDEX x ON inbound_messages (peer_id);\n", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			embedded, err := fs.Glob(db.Migrations(), "*.sql")
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range embedded {
				b, err := fs.ReadFile(db.Migrations(), name)
				if err != nil {
					t.Fatal(err)
				}
				fsys[name] = &fstest.MapFile{Data: b}
			}
			if strings.Contains(c.sql, "reveal_log (created_at)") && !strings.Contains(c.sql, "CREATE TABLE") {
				fsys["00098_reveal_log.sql"] = &fstest.MapFile{Data: []byte("-- +goose Up\nCREATE TABLE reveal_log (id bigint PRIMARY KEY, created_at timestamptz);\n")}
			}
			fsys["00099_new.sql"] = &fstest.MapFile{Data: []byte(c.sql)}
			report, err := checkIndexBuilds(fsys)
			if err != nil {
				t.Fatal(err)
			}
			refused := false
			for _, v := range report.violations {
				if strings.Contains(v, "00099_new.sql") {
					refused = true
					t.Logf("refused: %s", v)
				} else {
					t.Errorf("a violation outside the new migration: %s", v)
				}
			}
			if refused != c.refused {
				t.Errorf("refused %v, want %v:\n%s", refused, c.refused, c.sql)
			}
		})
	}
}

// indexReport is what checkIndexBuilds found.
type indexReport struct {
	violations []string
	// concurrent lists "<version> <table>" of each concurrent build on a growing table.
	concurrent []string
	// created maps each table to the migration that creates it.
	created map[string]int64
	// builds and files count the index builds and the migrations read.
	builds, files int
}

// checkIndexBuilds reads the Up section of every migration in fsys, in order, and checks
// each statement that builds an index (CREATE [UNIQUE] INDEX, REINDEX, ALTER TABLE ... ADD
// a UNIQUE, PRIMARY KEY or EXCLUDE constraint that builds its index).
func checkIndexBuilds(fsys fs.FS) (indexReport, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return indexReport{}, err
	}
	type migration struct {
		name    string
		version int64
	}
	var files []migration
	for _, name := range names {
		prefix, _, _ := strings.Cut(name, "_")
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			return indexReport{}, fmt.Errorf("migration %s: no version: %w", name, err)
		}
		files = append(files, migration{name, v})
	}
	slices.SortFunc(files, func(a, b migration) int { return int(a.version - b.version) })
	report := indexReport{created: map[string]int64{}, files: len(files)}
	indexTable := map[string]string{} // index name -> its table, from the CREATE INDEX statements read
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f.name)
		if err != nil {
			return indexReport{}, err
		}
		up, noTx := upSection(string(b))
		for _, stmt := range statements(up) {
			build, ok := indexBuildOf(stmt)
			if !ok {
				if table, ok := createdTable(stmt); ok {
					if _, seen := report.created[table]; !seen {
						report.created[table] = f.version
					}
				}
				continue
			}
			report.builds++
			if build.index != "" && build.table != "" {
				indexTable[build.index] = build.table
			}
			var targets []string
			switch {
			case build.everyTable:
				for table, v := range report.created {
					if v < f.version {
						targets = append(targets, table)
					}
				}
				slices.Sort(targets)
			case build.table == "" && indexTable[build.index] != "":
				targets = []string{indexTable[build.index]}
			case build.table == "":
				// An index this check cannot place: treat it as one of a growing table.
				targets = []string{"(the table of index " + build.index + ")"}
			default:
				targets = []string{build.table}
			}
			for _, table := range targets {
				why, growing := growingTable(table)
				if strings.HasPrefix(table, "(") {
					why, growing = "a table this check cannot tell", true
				}
				if !growing || report.created[table] == f.version {
					continue // does not grow, or created (empty) in this migration
				}
				var missing []string
				if !build.concurrent {
					missing = append(missing, "CONCURRENTLY")
				}
				if !noTx {
					missing = append(missing, "-- +goose NO TRANSACTION")
				}
				if build.create && build.concurrent && (build.index == "" || !build.ifNotExists) {
					missing = append(missing, "a name and IF NOT EXISTS (a failed build is dropped by name and the migration runs again)")
				}
				if len(missing) > 0 {
					report.violations = append(report.violations, fmt.Sprintf("%s: %q builds an index on %s (%s), which existed before this migration, without %s",
						f.name, build.text, table, why, strings.Join(missing, " and ")))
					continue
				}
				report.concurrent = append(report.concurrent, fmt.Sprintf("%05d %s", f.version, table))
			}
		}
	}
	return report, nil
}

// upSection returns the Up section of a goose migration and whether the migration runs
// without a transaction, read with goose's rules: an annotation is a line that starts
// with "--" and holds "+goose"; its name is matched without regard to case.
func upSection(text string) (string, bool) {
	var up strings.Builder
	noTx, inUp := false, false
	for line := range strings.Lines(text) {
		if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "--") && strings.Contains(trimmed, "+goose") {
			cmd := strings.TrimSpace(strings.Replace(strings.ReplaceAll(trimmed, "--", ""), "+goose", "", 1))
			switch {
			case strings.EqualFold(cmd, "NO TRANSACTION"):
				noTx = true
			case strings.EqualFold(cmd, "Up"):
				inUp = true
			case strings.EqualFold(cmd, "Down"):
				inUp = false
			}
			continue
		}
		if inUp {
			up.WriteString(line)
		}
	}
	return up.String(), noTx
}

// token is a word of SQL: a keyword or an identifier (lowercased unless quoted), or a
// punctuation character.
type token struct {
	text   string
	quoted bool
}

// statements splits sql into statements of tokens, leaving out comments, string
// literals and dollar-quoted bodies.
func statements(sql string) [][]token {
	var out [][]token
	var cur []token
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
			cur = nil
		}
	}
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				end = len(sql) - i
			}
			i += end
		case strings.HasPrefix(sql[i:], "/*"):
			depth := 0
			for i < len(sql) {
				if strings.HasPrefix(sql[i:], "/*") {
					depth++
					i += 2
				} else if strings.HasPrefix(sql[i:], "*/") {
					depth--
					i += 2
					if depth == 0 {
						break
					}
				} else {
					i++
				}
			}
		case c == '\'':
			i++
			for i < len(sql) {
				if sql[i] == '\'' && i+1 < len(sql) && sql[i+1] == '\'' {
					i += 2
				} else if sql[i] == '\'' {
					i++
					break
				} else {
					i++
				}
			}
			cur = append(cur, token{text: "'…'"})
		case c == '"':
			j := i + 1
			var name strings.Builder
			for j < len(sql) {
				if sql[j] == '"' && j+1 < len(sql) && sql[j+1] == '"' {
					name.WriteByte('"')
					j += 2
				} else if sql[j] == '"' {
					j++
					break
				} else {
					name.WriteByte(sql[j])
					j++
				}
			}
			cur = append(cur, token{text: name.String(), quoted: true})
			i = j
		case c == '$' && dollarTag(sql[i:]) != "":
			tag := dollarTag(sql[i:])
			end := strings.Index(sql[i+len(tag):], tag)
			if end < 0 {
				i = len(sql)
			} else {
				i += len(tag) + end + len(tag)
			}
			cur = append(cur, token{text: "$…$"})
		case isIdentStart(c):
			j := i + 1
			for j < len(sql) && (isIdentStart(sql[j]) || sql[j] >= '0' && sql[j] <= '9' || sql[j] == '$') {
				j++
			}
			cur = append(cur, token{text: strings.ToLower(sql[i:j])})
			i = j
		case c == ';':
			flush()
			i++
		default:
			cur = append(cur, token{text: string(c)})
			i++
		}
	}
	flush()
	return out
}

// dollarTag returns the opening tag ($$ or $name$) at the start of s, or "".
func dollarTag(s string) string {
	for j := 1; j < len(s); j++ {
		switch {
		case s[j] == '$':
			return s[:j+1]
		case !isIdentStart(s[j]) && !(j > 1 && s[j] >= '0' && s[j] <= '9'):
			return ""
		}
	}
	return ""
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// indexBuild is a statement that builds an index.
type indexBuild struct {
	text string // the statement, abridged
	// table is the table it builds on ("" when it names only its index); index the index
	// ("" when unnamed); everyTable: a REINDEX of a schema, database or system.
	table, index string
	everyTable   bool
	create       bool // a CREATE INDEX
	concurrent   bool
	ifNotExists  bool
}

// indexBuildOf reads stmt as a statement that builds an index, when it is one.
func indexBuildOf(stmt []token) (indexBuild, bool) {
	p := &tokens{stmt: stmt}
	b := indexBuild{text: abridged(stmt)}
	switch {
	case p.word("create"):
		p.word("unique")
		if !p.word("index") {
			return indexBuild{}, false
		}
		b.create = true
		b.concurrent = p.word("concurrently")
		b.ifNotExists = p.words("if", "not", "exists")
		if !p.peek("on") {
			b.index = p.name()
		}
		if !p.word("on") {
			return indexBuild{}, false
		}
		p.word("only")
		b.table = p.name()
		return b, true
	case p.word("reindex"):
		if p.word("(") {
			for !p.done() && !p.word(")") {
				p.next()
			}
		}
		kind := p.next()
		b.concurrent = p.word("concurrently")
		switch kind {
		case "index":
			b.index = p.name()
		case "table":
			b.table = p.name()
		default: // schema, database, system
			b.everyTable = true
		}
		return b, true
	case p.words("alter", "table"):
		p.words("if", "exists")
		p.word("only")
		b.table = p.name()
		// An added UNIQUE, PRIMARY KEY or EXCLUDE constraint builds its index, unless it takes
		// one built before (USING INDEX).
		builds := false
		for i := p.i; i < len(stmt); i++ {
			if stmt[i].quoted {
				continue
			}
			switch stmt[i].text {
			case "unique", "primary", "exclude":
				if !(i+2 < len(stmt) && stmt[i+1].text == "using" && stmt[i+2].text == "index") &&
					!(i+3 < len(stmt) && stmt[i+1].text == "key" && stmt[i+2].text == "using" && stmt[i+3].text == "index") {
					builds = true
				}
			}
		}
		return b, builds
	}
	return indexBuild{}, false
}

// createdTable returns the table a CREATE TABLE statement creates.
func createdTable(stmt []token) (string, bool) {
	p := &tokens{stmt: stmt}
	if !p.word("create") {
		return "", false
	}
	for _, modifier := range []string{"global", "local", "temporary", "temp", "unlogged"} {
		p.word(modifier)
	}
	if !p.word("table") {
		return "", false
	}
	p.words("if", "not", "exists")
	return p.name(), true
}

// tokens reads a statement's tokens in order.
type tokens struct {
	stmt []token
	i    int
}

func (p *tokens) done() bool { return p.i >= len(p.stmt) }

func (p *tokens) peek(w string) bool {
	return !p.done() && !p.stmt[p.i].quoted && p.stmt[p.i].text == w
}

// word consumes the keyword w when it comes next.
func (p *tokens) word(w string) bool {
	if p.peek(w) {
		p.i++
		return true
	}
	return false
}

// words consumes the keywords ws when they come next, all of them.
func (p *tokens) words(ws ...string) bool {
	for k, w := range ws {
		if p.i+k >= len(p.stmt) || p.stmt[p.i+k].quoted || p.stmt[p.i+k].text != w {
			return false
		}
	}
	p.i += len(ws)
	return true
}

func (p *tokens) next() string {
	if p.done() {
		return ""
	}
	p.i++
	return p.stmt[p.i-1].text
}

// name consumes a name, perhaps schema-qualified, and returns its last part.
func (p *tokens) name() string {
	n := p.next()
	for p.word(".") {
		n = p.next()
	}
	return n
}

// abridged is the statement's first words, for a message.
func abridged(stmt []token) string {
	var words []string
	for _, t := range stmt[:min(len(stmt), 14)] {
		words = append(words, t.text)
	}
	s := strings.Join(words, " ")
	if len(stmt) > 14 {
		s += " …"
	}
	return s
}

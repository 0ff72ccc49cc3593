package redact_test

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/redact"
)

// A database URL or DSN keeps what names the database and loses every password: in the
// user info, in a password or sslpassword parameter (however spelt), in a quoted keyword.
func TestDatabaseURLHidesEveryPasswordAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"postgres://u:s3cretpw@127.0.0.1:5432/test", "postgres://u:xxxxx@127.0.0.1:5432/test"},
		{"postgresql://u:s3cretpw@db.example:6432/app?sslmode=require&search_path=s1",
			"postgresql://u:xxxxx@db.example:6432/app?sslmode=require&search_path=s1"},
		{"postgres://u@h/db?password=s3cretpw&sslpassword=s3cretpw&PassWord=s3cretpw&pass%77ord=s3cretpw&x=1",
			"postgres://u@h/db?password=xxxxx&sslpassword=xxxxx&PassWord=xxxxx&pass%77ord=xxxxx&x=1"},
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
		{"host=127.0.0.1 port=5432 user=u password=s3cretpw dbname=test", "host=127.0.0.1 port=5432 user=u password=xxxxx dbname=test"},
		{"host=h password='s3cret pw' sslpassword = s3cretpw dbname=test", "host=h password=xxxxx sslpassword=xxxxx dbname=test"},
		{"postgres://u:s3cretpw@h:notaport/db", "(a PostgreSQL URL that does not parse; not shown, it may hold a password)"},
		{"", ""},
	} {
		got := redact.DatabaseURL(c.in)
		if got != c.want {
			t.Errorf("DatabaseURL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("DatabaseURL(%q) shows the password: %q", c.in, got)
		}
	}
	if redact.Secret("tak_123") != redact.Set || redact.Secret(" ") != "" {
		t.Errorf("Secret: %q %q", redact.Secret("tak_123"), redact.Secret(" "))
	}
}

// A flag defined with DatabaseURLVar keeps the raw value and prints its default redacted.
func TestADatabaseURLFlagPrintsItsDefaultWithoutThePassword(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	var v string
	redact.DatabaseURLVar(fs, &v, "database-url", "postgres://u:s3cretpw@h/db", "PostgreSQL URL")
	fs.PrintDefaults()
	if strings.Contains(out.String(), "s3cret") || !strings.Contains(out.String(), "postgres://u:xxxxx@h/db") {
		t.Fatalf("defaults:\n%s", out.String())
	}
	if v != "postgres://u:s3cretpw@h/db" {
		t.Fatalf("default value %q", v)
	}
	if err := fs.Parse([]string{"--database-url", "postgres://v:other@h/db"}); err != nil || v != "postgres://v:other@h/db" {
		t.Fatalf("parsed %q, %v", v, err)
	}
}

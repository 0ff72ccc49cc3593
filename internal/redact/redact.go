// Package redact is the one place where ilinkflow hides the secrets of its settings before
// they are printed: the defaults a --help shows, the log lines and the errors that name a
// database. A PostgreSQL URL or keyword/value DSN keeps everything but its passwords
// ([DatabaseURL]); a pure secret (an API key, a sealing key, a token) is only ever said to
// be set or not ([Secret]).
package redact

import (
	"flag"
	"net/url"
	"regexp"
	"strings"
)

// Mask is what replaces a password: the same as net/url's [url.URL.Redacted].
const Mask = "xxxxx"

// Set is what a secret that has a value prints instead of it.
const Set = "(set)"

// Secret returns [Set] when v holds a secret and "" when it is empty.
func Secret(v string) string {
	if strings.TrimSpace(v) == "" {
		return ""
	}
	return Set
}

// unparsable is what DatabaseURL returns for a postgres:// URL it cannot parse: such a
// string has no reliable boundaries, so no part of it is shown.
const unparsable = "(a PostgreSQL URL that does not parse; not shown, it may hold a password)"

// passwordKeys are the connection parameters whose values are passwords (libpq's names).
var passwordKeys = map[string]bool{"password": true, "sslpassword": true}

// dsnPassword matches a password parameter of a keyword/value DSN, quoted or not.
var dsnPassword = regexp.MustCompile(`(?i)\b(ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'?|\S*)`)

// DatabaseURL returns the PostgreSQL connection string s with every password replaced by
// [Mask]: the user info's password and the password and sslpassword parameters of a
// postgres:// or postgresql:// URL, or the password and sslpassword keywords of a
// keyword/value DSN ("host=... password=..."). Everything else (user, host, port,
// database, search_path, ...) is kept, so the result says which database is meant. A URL
// that does not parse is not shown at all.
func DatabaseURL(s string) string {
	trimmed := strings.TrimSpace(s)
	lower := strings.ToLower(trimmed)
	if !strings.HasPrefix(lower, "postgres://") && !strings.HasPrefix(lower, "postgresql://") {
		return dsnPassword.ReplaceAllString(s, "${1}password="+Mask)
	}
	u, err := url.Parse(trimmed)
	if err != nil {
		return unparsable
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			k, _, _ := strings.Cut(p, "=")
			if key, err := url.QueryUnescape(k); err == nil && passwordKeys[strings.ToLower(key)] {
				parts[i] = k + "=" + Mask
			} else if err != nil {
				return unparsable
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	return u.Redacted()
}

// DatabaseURLVar defines a string flag on fs holding a PostgreSQL URL, stored in *p with
// value as its default. Its default is printed redacted ([DatabaseURL]) by
// [flag.FlagSet.PrintDefaults] and in parse errors, so a default taken from DATABASE_URL
// does not put the password on the screen.
func DatabaseURLVar(fs *flag.FlagSet, p *string, name, value, usage string) {
	*p = value
	fs.Var(&databaseURLValue{p: p}, name, usage)
}

// databaseURLValue is a flag.Value whose String is redacted; Set keeps the raw value.
type databaseURLValue struct{ p *string }

// String is the redacted value ("" for the zero value flag.PrintDefaults makes).
func (v *databaseURLValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return DatabaseURL(*v.p)
}

// Set stores the raw value.
func (v *databaseURLValue) Set(s string) error { *v.p = s; return nil }

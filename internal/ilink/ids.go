package ilink

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ID is a lossless uint64 identifier carried as a JSON number, such as a
// message's message_id. It never passes through int64 or float64: the JSON
// literal is parsed with strconv.ParseUint. Decoding also accepts the
// decimal string form ("123"), an empty string and null (both leave zero).
// Zero means "absent".
type ID uint64

// StringID is a lossless uint64 identifier carried as a JSON string, such as
// an item's msg_id or a quote's svr_id. Decoding accepts both the string and
// the number form; encoding writes the decimal string. Zero means "absent".
type StringID uint64

// errBadID is wrapped by every id parse failure.
var errBadID = errors.New("invalid uint64 id")

// ParseID parses a decimal uint64 id such as "18446744073709551615".
func ParseID(s string) (ID, error) {
	v, err := parseDecimal(s)
	return ID(v), err
}

// String returns the id in decimal.
func (id ID) String() string { return strconv.FormatUint(uint64(id), 10) }

// MarshalJSON writes the id as a JSON number.
func (id ID) MarshalJSON() ([]byte, error) {
	return strconv.AppendUint(nil, uint64(id), 10), nil
}

// UnmarshalJSON parses a JSON number or decimal string without loss.
func (id *ID) UnmarshalJSON(b []byte) error {
	v, set, err := parseIDLiteral(b)
	if err != nil {
		return err
	}
	if set {
		*id = ID(v)
	}
	return nil
}

// String returns the id in decimal.
func (id StringID) String() string { return strconv.FormatUint(uint64(id), 10) }

// MarshalJSON writes the id as a JSON string of decimal digits.
func (id StringID) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 22)
	b = append(b, '"')
	b = strconv.AppendUint(b, uint64(id), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON parses a JSON number or decimal string without loss.
func (id *StringID) UnmarshalJSON(b []byte) error {
	v, set, err := parseIDLiteral(b)
	if err != nil {
		return err
	}
	if set {
		*id = StringID(v)
	}
	return nil
}

// parseIDLiteral parses a raw JSON value holding an id. set is false for
// null, which leaves the destination untouched as encoding/json does.
func parseIDLiteral(b []byte) (v uint64, set bool, err error) {
	if string(b) == "null" {
		return 0, false, nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return 0, false, fmt.Errorf("%w: %w", errBadID, err)
		}
		if s == "" {
			return 0, true, nil
		}
		v, err := parseDecimal(s)
		return v, err == nil, err
	}
	v, err = parseDecimal(string(b))
	return v, err == nil, err
}

// parseDecimal accepts only ASCII digits (no sign, exponent or fraction).
func parseDecimal(s string) (uint64, error) {
	if s == "" || len(s) > 20 {
		return 0, fmt.Errorf("%w: %d characters", errBadID, len(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: not a decimal integer", errBadID)
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: out of range", errBadID)
	}
	return v, nil
}

// DecimalString is a non-negative count carried as a JSON string of decimal
// digits, such as a file item's len. Decoding also accepts a JSON number so
// that a server sending the other form does not fail a whole page.
type DecimalString string

// UnmarshalJSON accepts a JSON string, a JSON number literal, or null.
func (d *DecimalString) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*d = DecimalString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*d = DecimalString(n.String())
	return nil
}

// Int64 parses the value as a non-negative decimal integer.
func (d DecimalString) Int64() (int64, error) {
	v, err := parseDecimal(string(d))
	if err != nil {
		return 0, err
	}
	if v > 1<<63-1 {
		return 0, fmt.Errorf("%w: out of range", errBadID)
	}
	return int64(v), nil
}

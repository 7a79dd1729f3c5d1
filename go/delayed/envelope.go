package delayed

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A blob's outer layers read without decoding what they hold: a task's array, its strings and its
// options map's keys, each value kept as its raw msgpack, decoded only when asked for (a handler's
// payload by shamaton/msgpack, as go-delayed decodes it).

var errShort = errors.New("msgpack ends early")

// reader walks a msgpack value.
type reader struct {
	data []byte
	at   int
}

func (r *reader) need(n int) error {
	if n < 0 || r.at+n > len(r.data) {
		return errShort
	}
	return nil
}

func (r *reader) byte() (byte, error) {
	if err := r.need(1); err != nil {
		return 0, err
	}
	r.at++
	return r.data[r.at-1], nil
}

func (r *reader) uint(size int) (int, error) {
	if err := r.need(size); err != nil {
		return 0, err
	}
	var n uint64
	switch size {
	case 1:
		n = uint64(r.data[r.at])
	case 2:
		n = uint64(binary.BigEndian.Uint16(r.data[r.at:]))
	case 4:
		n = uint64(binary.BigEndian.Uint32(r.data[r.at:]))
	}
	r.at += size
	if n > uint64(len(r.data)) {
		return 0, errShort
	}
	return int(n), nil
}

// header reads a value's first byte, its length-carrying bytes, and returns its kind
// ('a'rray, 'm'ap, 's'tring, 'b'in, 'n'il, or 'o'ther) and its length (items, pairs or bytes;
// for 'o'ther, the bytes after the header).
func (r *reader) header() (kind byte, length int, err error) {
	code, err := r.byte()
	if err != nil {
		return 0, 0, err
	}
	switch {
	case code <= 0x7f, code >= 0xe0, code == 0xc2, code == 0xc3:
		return 'o', 0, nil
	case code >= 0x80 && code <= 0x8f:
		return 'm', int(code & 0x0f), nil
	case code >= 0x90 && code <= 0x9f:
		return 'a', int(code & 0x0f), nil
	case code >= 0xa0 && code <= 0xbf:
		return 's', int(code & 0x1f), nil
	case code == 0xc0:
		return 'n', 0, nil
	}
	sized := func(kind byte, size int) (byte, int, error) {
		n, err := r.uint(size)
		return kind, n, err
	}
	switch code {
	case 0xc4, 0xc5, 0xc6:
		return sized('b', 1<<(code-0xc4))
	case 0xd9, 0xda, 0xdb:
		return sized('s', 1<<(code-0xd9))
	case 0xdc, 0xdd:
		return sized('a', 2<<(code-0xdc))
	case 0xde, 0xdf:
		return sized('m', 2<<(code-0xde))
	case 0xcc, 0xd0:
		return 'o', 1, nil
	case 0xcd, 0xd1:
		return 'o', 2, nil
	case 0xca, 0xce, 0xd2:
		return 'o', 4, nil
	case 0xcb, 0xcf, 0xd3:
		return 'o', 8, nil
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return 'o', 1 + 1<<(code-0xd4), nil
	case 0xc7, 0xc8, 0xc9:
		n, err := r.uint(1 << (code - 0xc7))
		return 'o', n + 1, err
	}
	return 0, 0, fmt.Errorf("msgpack byte 0x%02x is no value's start", code)
}

// skip moves past one whole value and returns its raw bytes.
func (r *reader) skip() ([]byte, error) {
	start := r.at
	pending := 1
	for ; pending > 0; pending-- {
		kind, n, err := r.header()
		if err != nil {
			return nil, err
		}
		switch kind {
		case 'a':
			pending += n
		case 'm':
			pending += 2 * n
		case 's', 'b', 'o':
			if err := r.need(n); err != nil {
				return nil, err
			}
			r.at += n
		}
	}
	return r.data[start:r.at], nil
}

// text reads a string.
func (r *reader) text() (string, error) {
	kind, n, err := r.header()
	if err != nil {
		return "", err
	}
	if kind != 's' {
		return "", errors.New("not a string")
	}
	if err := r.need(n); err != nil {
		return "", err
	}
	r.at += n
	return string(r.data[r.at-n : r.at]), nil
}

// appendHeader writes an array's, a map's, a string's or a bin's header, as msgpack-python does
// (the shortest form).
func appendHeader(out []byte, kind byte, n int) []byte {
	switch kind {
	case 'a', 'm':
		fix, code := byte(0x90), byte(0xdc)
		if kind == 'm' {
			fix, code = 0x80, 0xde
		}
		if n < 16 {
			return append(out, fix|byte(n))
		}
		if n < 1<<16 {
			return binary.BigEndian.AppendUint16(append(out, code), uint16(n))
		}
		return binary.BigEndian.AppendUint32(append(out, code+1), uint32(n))
	case 's':
		if n < 32 {
			return append(out, 0xa0|byte(n))
		}
		if n < 1<<8 {
			return append(out, 0xd9, byte(n))
		}
		if n < 1<<16 {
			return binary.BigEndian.AppendUint16(append(out, 0xda), uint16(n))
		}
		return binary.BigEndian.AppendUint32(append(out, 0xdb), uint32(n))
	default: // 'b'
		if n < 1<<8 {
			return append(out, 0xc4, byte(n))
		}
		if n < 1<<16 {
			return binary.BigEndian.AppendUint16(append(out, 0xc5), uint16(n))
		}
		return binary.BigEndian.AppendUint32(append(out, 0xc6), uint32(n))
	}
}

func appendString(out []byte, s string) []byte {
	return append(appendHeader(out, 's', len(s)), s...)
}

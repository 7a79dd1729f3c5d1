package delayed

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"sort"
)

// A unique task's lock is named by its UniqueKey, or else by the task's digest, as Python's producer
// names it (delayed/protocol/producer.py, unique_call): the SHA-1 of the blob Python's serialize()
// writes for the same call, the options it carries included, its unique and tracking state, its headers and
// its expiry not.
// So a Go and a Python producer of the same task take the same lock. Go writes some calls in other
// bytes than Python does, which the digest undoes:
//   - a PyTask is written as Python writes it: nil args and kwargs as empty ones, and, without
//     options, empty kwargs then empty args dropped from the end (NewPyTask always writes three fields);
//   - a GoTask's nil payload (go-delayed's NewGoTask(f, nil)) is the bin of msgpack nil, as
//     GoTask(f, None) writes it;
//   - its headers and expires_at are left out, as Python's producer leaves them out: they are not the
//     call (a tracing middleware's traceparent, and an expiry counted from the enqueue, differ at each
//     enqueue of the same call);
//   - the entries of every map in the arguments are sorted by key: Go writes a map's entries in random
//     order, so two identical calls would otherwise differ. A Python dict of several keys in another
//     order digests otherwise: give such tasks a UniqueKey.

// emptyOptions is an options map with nothing in it, which Python never writes: what is left of a
// task's options once its headers and expiry are taken out, when it had no other.
var emptyOptions = []byte{0x80}

// uniqueDigest is the lock key of a task's blob without UniqueKey: hex SHA-1 of its Python form, without
// its headers and expires_at (see above).
func uniqueDigest(blob []byte) (string, error) {
	task, err := decodeTask(blob)
	if err != nil {
		return "", err
	}
	if o := optionsOf(task); len(o.Headers) > 0 || o.ExpiresAt != nil { // each enqueue's own: not the call's identity
		o.Headers, o.ExpiresAt = nil, nil
		if blob, err = blobWithOptions(blob, o); err != nil {
			return "", err
		}
	}
	python, err := pythonForm(blob)
	if err != nil {
		return "", err
	}
	sum := sha1.Sum(python)
	return hex.EncodeToString(sum[:]), nil
}

// pythonForm is blob as Python's serialize() writes the same call (see above).
func pythonForm(blob []byte) ([]byte, error) {
	task, err := decodeTask(blob)
	if err != nil {
		return nil, err
	}
	r := &reader{data: blob}
	_, n, _ := r.header()
	funcPath, _ := r.skip()
	elements := [][]byte{funcPath}
	if _, isGo := task.(*GoTask); isGo {
		payload, _ := r.skip()
		inner := noArgument
		if payload[0] != 0xc0 {
			inner = task.(*GoTask).raw.Payload
		}
		if sorted, err := sortedMaps(inner); err == nil {
			inner = sorted
		}
		elements = append(elements, append(appendHeader(nil, 'b', len(inner)), inner...))
		for i := 2; i < n; i++ {
			if options, _ := r.skip(); !bytes.Equal(options, emptyOptions) {
				elements = append(elements, options)
			}
		}
		return joinArray(elements), nil
	}
	for i, empty := range [][]byte{{0x90}, {0x80}, {0x00}} { // args, kwargs, retry as Python writes none
		element := empty
		if i+1 < n {
			element, _ = r.skip()
			if element[0] == 0xc0 {
				element = empty
			} else if i < 2 {
				if element, err = sortedMaps(element); err != nil {
					return nil, err
				}
			}
		}
		elements = append(elements, element)
	}
	if n == 5 {
		if options, _ := r.skip(); !bytes.Equal(options, emptyOptions) {
			return joinArray(append(elements, options)), nil
		}
	}
	for _, empty := range [][]byte{{0x00}, {0x80}, {0x90}} { // keakon's trailing defaults, dropped
		if len(elements) == 1 || !bytes.Equal(elements[len(elements)-1], empty) {
			break
		}
		elements = elements[:len(elements)-1]
	}
	return joinArray(elements), nil
}

func joinArray(elements [][]byte) []byte {
	return bytes.Join(append([][]byte{appendHeader(nil, 'a', len(elements))}, elements...), nil)
}

// sortedMaps is a msgpack value with the entries of every map in it sorted by key (string keys by
// their text, others by their bytes, strings first).
func sortedMaps(value []byte) ([]byte, error) {
	r := &reader{data: value}
	out, err := appendSorted(nil, r)
	if err == nil && r.at != len(value) {
		err = errShort
	}
	return out, err
}

func appendSorted(out []byte, r *reader) ([]byte, error) {
	start := r.at
	kind, n, err := r.header()
	if err != nil {
		return nil, err
	}
	switch kind {
	case 'a':
		out = append(out, r.data[start:r.at]...)
		for i := 0; i < n; i++ {
			if out, err = appendSorted(out, r); err != nil {
				return nil, err
			}
		}
		return out, nil
	case 'm':
		out = append(out, r.data[start:r.at]...)
		type entry struct{ key, value []byte }
		entries := make([]entry, n)
		for i := range entries {
			if entries[i].key, err = appendSorted(nil, r); err != nil {
				return nil, err
			}
			if entries[i].value, err = appendSorted(nil, r); err != nil {
				return nil, err
			}
		}
		sort.SliceStable(entries, func(i, j int) bool { return keyLess(entries[i].key, entries[j].key) })
		for _, e := range entries {
			out = append(append(out, e.key...), e.value...)
		}
		return out, nil
	}
	r.at = start
	raw, err := r.skip()
	return append(out, raw...), err
}

func keyLess(a, b []byte) bool {
	textA, errA := (&reader{data: a}).text()
	textB, errB := (&reader{data: b}).text()
	switch {
	case errA == nil && errB == nil:
		return textA < textB
	case errA == nil || errB == nil:
		return errA == nil
	}
	return bytes.Compare(a, b) < 0
}

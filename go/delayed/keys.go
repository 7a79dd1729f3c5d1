package delayed

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
)

// Key names, as delayed/wire/keys.py defines them (tests/test_go_module.py compares the two): a queue
// named N keeps its tasks in N, their notifications in N_noti, what each worker id holds in
// N_processing (go-delayed's three), and the rest of our state in the keys below.
const (
	notiKeySuffix       = "_noti"
	processingKeySuffix = "_processing"
	deadSuffix          = "_dead"
	deadLettersSuffix   = "_dead_letters"
	scheduledSuffix     = "_scheduled"
	uniqueInfix         = "_unique:"
	workersSuffix       = "_workers"
	unnotifiedSuffix    = "_unnotified"
	countsSuffix        = "_counts"
	trackedSuffix       = "_tracked"
	taskInfix           = "_task:"
	workerInfix         = "_worker:"
	pausedSuffix        = "_paused"
	samplesSuffix       = "_samples"
	headSinceSuffix     = "_head_since"
	sweptSuffix         = "_swept"
	periodicSuffix      = "_periodic"
	limitsSuffix        = "_limits"
	limitHoldersSuffix  = "_limit_holders"
	limitRunningInfix   = "_limit_running:"
	limitWaitingInfix   = "_limit_waiting:"
	limitStartsInfix    = "_limit_starts:"
	limitReservedInfix  = "_limit_reserved:"
	// cancelsSuffix names a queue's cancels channel (pubsub, not a key): the cancel of a tracked task a
	// worker runs publishes the task's id there, and our workers serving the queue listen (cancels.go).
	cancelsSuffix = "_cancels"

	// workerIDPrefix starts every id our workers (Python's and Go's) hold tasks under; go-delayed's
	// ids are 32 bare hex digits. Sweepers count a crash only for ids of ours.
	workerIDPrefix = "delayed-py-"

	// scheduledPrefixBytes is the nonce before the blob in a member of a queue's scheduled set: its
	// first byte says why the task waits (scheduledDelayed, scheduledRetry), the rest are random, which
	// keeps identical tasks due at the same time apart.
	scheduledPrefixBytes = 8
	scheduledDelayed     = 'd' // a producer's Delay or At
	scheduledRetry       = 'r' // a worker's retry with backoff
	scheduledLimited     = 'l' // held back by its rate_limit at its claim (admit.lua)
)

// queueKeys are the keys of one queue, by the names the Lua scripts' headers give them.
type queueKeys struct {
	name  string
	named map[string]string
}

func keysOf(name string) *queueKeys {
	return &queueKeys{name: name, named: map[string]string{
		"name":          name,
		"noti":          name + notiKeySuffix,
		"processing":    name + processingKeySuffix,
		"dead":          name + deadSuffix,
		"dead_letters":  name + deadLettersSuffix,
		"scheduled":     name + scheduledSuffix,
		"workers":       name + workersSuffix,
		"unnotified":    name + unnotifiedSuffix,
		"counts":        name + countsSuffix,
		"tracked":       name + trackedSuffix,
		"paused":        name + pausedSuffix,
		"periodic":      name + periodicSuffix,
		"samples":       name + samplesSuffix,
		"head_since":    name + headSinceSuffix,
		"swept":         name + sweptSuffix,
		"task_prefix":   name + taskInfix,
		"limits":        name + limitsSuffix,
		"limit_holders": name + limitHoldersSuffix,
		// the prefixes of a limit key's keys (delayed/protocol/lua/limits.lua), which the scripts that
		// end a hold take as arguments, the limit key being known only from limit_holders
		"limit_running_prefix":  name + limitRunningInfix,
		"limit_waiting_prefix":  name + limitWaitingInfix,
		"limit_starts_prefix":   name + limitStartsInfix,
		"limit_reserved_prefix": name + limitReservedInfix,
		"cancels":               name + cancelsSuffix,
	}}
}

// byName is the key a script's header names, if the queue has one of that name.
func (k *queueKeys) byName(name string) (string, bool) {
	key, ok := k.named[name]
	return key, ok
}

func (k *queueKeys) key(name string) string { return k.named[name] }

// task is a tracked task's record.
func (k *queueKeys) task(id string) string { return k.name + taskInfix + id }

// workerInfo is one of our workers' description, named after its main id.
func (k *queueKeys) workerInfo(workerID string) string { return k.name + workerInfix + workerID }

// limitKeys are the keys of one limit key (admit.lua's running, waiting, starts and reserved), as
// delayed/wire/keys.py's QueueKeys.limit_running and the rest name them.
func (k *queueKeys) limitKeys(key string) []any {
	return []any{k.named["limit_running_prefix"] + key, k.named["limit_waiting_prefix"] + key,
		k.named["limit_starts_prefix"] + key, k.named["limit_reserved_prefix"] + key}
}

// unique is the lock of the unique tasks with this key.
func (k *queueKeys) unique(key string) string { return k.name + uniqueInfix + key }

// workerIDSuffix is what our ids on this queue end with: ":{tag}" for a name with a hash tag, so
// that their keep-alive keys live in the queue's Redis Cluster slot.
func (k *queueKeys) workerIDSuffix() string {
	if tag, ok := hashTag(k.name); ok {
		return ":{" + tag + "}"
	}
	return ""
}

// workerIDs are count ids for one worker process: one random base, then -1, -2, ... for the extra
// slots, each with the queue's suffix (delayed/wire/keys.py's new_worker_ids).
func (k *queueKeys) workerIDs(count int) []string {
	base := workerIDPrefix + randomHex(16)
	suffix := k.workerIDSuffix()
	ids := []string{base + suffix}
	for slot := 1; slot < count; slot++ {
		ids = append(ids, base+"-"+strconv.Itoa(slot)+suffix)
	}
	return ids
}

// scheduledMember is a scheduled-set member for blob, of this kind (scheduledDelayed or scheduledRetry):
// a nonce, then the blob (delayed/wire/keys.py's scheduled_nonce).
func scheduledMember(kind byte, blob string) string {
	nonce := make([]byte, scheduledPrefixBytes)
	nonce[0] = kind
	if _, err := rand.Read(nonce[1:]); err != nil {
		panic("delayed: no randomness: " + err.Error())
	}
	return string(nonce) + blob
}

// hashTag is the part of a key Redis Cluster hashes: between the first "{" and the next "}", if not empty.
func hashTag(name string) (string, bool) {
	start := strings.IndexByte(name, '{')
	if start < 0 {
		return "", false
	}
	end := strings.IndexByte(name[start+1:], '}')
	if end <= 0 {
		return "", false
	}
	return name[start+1 : start+1+end], true
}

func randomHex(size int) string {
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		panic("delayed: no randomness: " + err.Error())
	}
	return hex.EncodeToString(data)
}

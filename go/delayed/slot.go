package delayed

// clusterSlots is how many hash slots a Redis Cluster spreads keys over.
const clusterSlots = 16384

// keySlot is the Redis Cluster hash slot of a key: the CRC16 (XMODEM) of its hash tag, or of the whole
// key when it has none, modulo 16384, as Redis computes it.
func keySlot(key string) int {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for bit := 0; bit < 8; bit++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

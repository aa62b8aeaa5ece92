"""A plain struct walk of a little-endian pcapng: the oracle of the vectorised writer/reader."""
import struct


def slow_epbs(data: bytes):
    """(interface, ticks, caplen, packet, {option code: first value}) per EPB."""
    pos, out = 0, []
    while pos < len(data):
        btype, blen = struct.unpack_from("<II", data, pos)
        if btype == 6:
            iface, hi, lo, cap, _ = struct.unpack_from("<IIIII", data, pos + 8)
            o, opts = pos + 28 + (cap + 3) // 4 * 4, {}
            while o + 4 <= pos + blen - 4:
                code, ln = struct.unpack_from("<HH", data, o)
                if code == 0:
                    break
                opts.setdefault(code, data[o + 4:o + 4 + ln])
                o += 4 + (ln + 3) // 4 * 4
            out.append((iface, (hi << 32) | lo, cap, data[pos + 28:pos + 28 + cap], opts))
        pos += blen
    return out

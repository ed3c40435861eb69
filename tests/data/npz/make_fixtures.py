#!/usr/bin/env python3
"""Regenerates the .npz fixtures of tests/graph/npz_test.cc (halo's NpzReader).

Run from anywhere:  python3 tests/data/npz/make_fixtures.py
Needs NumPy. The arrays are deterministic; the test hard-codes their values, so change both
together. Zip timestamps differ between runs, which the test does not look at.

Files written next to this script:
  basic_compressed.npz  np.savez_compressed: the OGB-like arrays below (deflate entries)
  basic_stored.npz      np.savez, same arrays (stored entries)
  dtypes.npz            np.savez: one array per source dtype, incl. float16, big-endian '>i4',
                        complex, unicode, out-of-range values for the conversion tests
  fortran.npz           np.savez: Fortran-order 2-D and 3-D arrays plus a C-order twin
  zip64.npz             hand-built zip: ZIP64 EOCD record + locator, ZIP64 extra fields in
                        the central directory (all three fields; offset only; none, after an
                        unrelated extra field) and in every local header, an archive comment,
                        .npy headers of format versions 1.0, 2.0 and 3.0, stored and deflate
  bzip2.npz             zipfile with ZIP_BZIP2 (unsupported method 12)
  truncated.npz         first 2/3 of basic_compressed.npz (no end-of-central-directory record)
  truncated_entry.npz   hand-built zip whose deflate entry is cut in half (sizes consistent)
  corrupt_stored.npz    basic_stored.npz with one payload byte of node_feat flipped (CRC error)
  corrupt_compressed.npz basic_compressed.npz with one byte of edge_index's deflate data flipped
"""
import io
import os
import struct
import zipfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(HERE, name)


def basic_arrays():
    return dict(
        edge_index=np.array([[0, 0, 1, 2, 3, 4, 4], [1, 2, 2, 3, 4, 0, 1]], dtype=np.int64),
        node_feat=(np.arange(15, dtype=np.float32).reshape(5, 3) * np.float32(0.25)
                   - np.float32(1.0)),
        node_label=np.array([[0.0], [1.0], [np.nan], [3.0], [2.0]], dtype=np.float64),
        num_nodes_list=np.array([5], dtype=np.int64),   # 1-d
        num_edges_list=np.array(7, dtype=np.int64),     # 0-d
    )


def dtype_arrays():
    return dict(
        i1=np.array([-128, -1, 0, 127], dtype=np.int8),
        u1=np.array([0, 7, 255], dtype=np.uint8),
        i2=np.array([-32768, -1, 32767], dtype=np.int16),
        u2=np.array([0, 65535], dtype=np.uint16),
        i4=np.array([-2147483648, -1, 2147483647], dtype=np.int32),
        u4=np.array([0, 2147483647, 4294967295], dtype=np.uint32),
        u8=np.array([0, 2**63 - 1, 2**63], dtype=np.uint64),
        i8_big=np.array([0, 1, 2, 3, 4, 3000000000, -5], dtype=np.int64),
        i8_neg=np.array([7, -3000000000], dtype=np.int64),
        b1=np.array([True, False, True], dtype=np.bool_),
        # 1, -2, 0.5, max, min normal 2^-14, min subnormal 2^-24, subnormal 3*2^-16, inf, -inf,
        # nan, -0
        f2=np.array([0.0, 1.0, -2.0, 0.5, 65504.0, 2.0**-14, 2.0**-24, 3 * 2.0**-16,
                     np.inf, -np.inf, np.nan, -0.0], dtype=np.float16),
        f8_big=np.array([1.5, 1e300], dtype=np.float64),
        f8_inf=np.array([np.inf, -np.inf, -0.0], dtype=np.float64),
        be_i4=np.array([1, -2, 70000], dtype='>i4'),
        c8=np.array([1 + 2j], dtype=np.complex64),
        u3=np.array(['ab', 'cde'], dtype='<U3'),
        empty=np.zeros((0, 3), dtype=np.float32),
        i2_3d=np.arange(24, dtype=np.int16).reshape(2, 3, 4),
    )


def fortran_arrays():
    c2 = np.arange(6, dtype=np.int32).reshape(2, 3)
    c3 = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    f2 = np.asfortranarray(c2)
    f3 = np.asfortranarray(c3)
    assert f2.flags.f_contiguous and not f2.flags.c_contiguous
    return dict(f2d=f2, f3d=f3, c2d=c2, f1d=np.asfortranarray(np.arange(4, dtype=np.int64)))


def npy_bytes(arr, version=None):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version)
    return buf.getvalue()


def local_data_start(zip_path, name):
    """Offset of an entry's data (after its local header) and its compressed size."""
    with zipfile.ZipFile(zip_path) as z:
        info = z.getinfo(name)
    with open(zip_path, 'rb') as f:
        f.seek(info.header_offset)
        hdr = f.read(30)
    sig, nlen, elen = struct.unpack('<I22xHH', hdr)
    assert sig == 0x04034b50
    return info.header_offset + 30 + nlen + elen, info.compress_size, elen


def write_zip(zip_path, entries, zip64=False, comment=b''):
    """Hand-built zip. entries: list of dicts with name, data (bytes as stored in the archive),
    method (0 or 8), crc, usize and, for zip64 archives, cd64 (which central-directory fields go
    to the ZIP64 extra field: subset of 'usize', 'csize', 'offset') and pre_extra (extra-field
    bytes placed before the ZIP64 one)."""
    out = bytearray()
    central = bytearray()
    dos_time, dos_date = 0, (2024 - 1980) << 9 | 1 << 5 | 1
    for e in entries:
        name = e['name'].encode()
        offset = len(out)
        csize, usize = len(e['data']), e['usize']
        if zip64:
            lextra = struct.pack('<HHQQ', 1, 16, usize, csize)
            out += struct.pack('<IHHHHHIIIHH', 0x04034b50, 45, 0, e['method'], dos_time,
                               dos_date, e['crc'], 0xFFFFFFFF, 0xFFFFFFFF, len(name),
                               len(lextra))
            out += name + lextra
        else:
            out += struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, e['method'], dos_time,
                               dos_date, e['crc'], csize, usize, len(name), 0)
            out += name
        out += e['data']
        fields = e.get('cd64', ()) if zip64 else ()
        z64 = b''
        cd_usize, cd_csize, cd_off = usize, csize, offset
        if 'usize' in fields:
            z64 += struct.pack('<Q', usize)
            cd_usize = 0xFFFFFFFF
        if 'csize' in fields:
            z64 += struct.pack('<Q', csize)
            cd_csize = 0xFFFFFFFF
        if 'offset' in fields:
            z64 += struct.pack('<Q', offset)
            cd_off = 0xFFFFFFFF
        cextra = e.get('pre_extra', b'')
        if z64:
            cextra += struct.pack('<HH', 1, len(z64)) + z64
        central += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 45, 45 if zip64 else 20, 0,
                               e['method'], dos_time, dos_date, e['crc'], cd_csize, cd_usize,
                               len(name), len(cextra), 0, 0, 0, 0, cd_off)
        central += name + cextra
    cd_offset = len(out)
    out += central
    n = len(entries)
    if zip64:
        eocd64 = len(out)
        out += struct.pack('<IQHHIIQQQQ', 0x06064b50, 44, 45, 45, 0, 0, n, n, len(central),
                           cd_offset)
        out += struct.pack('<IIQI', 0x07064b50, 0, eocd64, 1)
        out += struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                           0xFFFFFFFF, len(comment))
    else:
        out += struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, n, n, len(central), cd_offset,
                           len(comment))
    out += comment
    with open(zip_path, 'wb') as f:
        f.write(out)


def deflate(data):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def entry(name, payload, method, **kw):
    data = deflate(payload) if method == 8 else payload
    return dict(name=name, data=data, method=method, crc=zlib.crc32(payload),
                usize=len(payload), **kw)


def check_same(zip_path, arrays):
    with np.load(zip_path) as z:
        assert list(z.keys()) == list(arrays.keys()), (zip_path, list(z.keys()))
        for k, v in arrays.items():
            got = z[k]
            assert got.dtype == v.dtype and got.shape == v.shape, (zip_path, k)
            assert np.array_equal(got, v, equal_nan=v.dtype.kind == 'f'), (zip_path, k)


def main():
    basic = basic_arrays()
    np.savez_compressed(path('basic_compressed.npz'), **basic)
    np.savez(path('basic_stored.npz'), **basic)
    np.savez(path('dtypes.npz'), **dtype_arrays())
    np.savez(path('fortran.npz'), **fortran_arrays())
    for name in ('basic_compressed.npz', 'basic_stored.npz'):
        check_same(path(name), basic)
        # numpy writes every entry with force_zip64: a ZIP64 extra in each local header.
        _, _, elen = local_data_start(path(name), 'edge_index.npy')
        assert elen >= 20, elen

    # ZIP64 archive, npy header versions 1.0 / 2.0 / 3.0.
    v1 = np.arange(5, dtype=np.int64) * 11          # [0, 11, 22, 33, 44]
    v2 = np.arange(6, dtype=np.float32).reshape(3, 2) / np.float32(4)
    v3 = np.array([[-1, 2], [3, -4]], dtype=np.int32)
    zentries = [
        entry('v1.npy', npy_bytes(v1, (1, 0)), 0, cd64=('usize', 'csize', 'offset'),
              pre_extra=struct.pack('<HHBI', 0x5455, 5, 1, 0)),
        entry('v2.npy', npy_bytes(v2, (2, 0)), 8, cd64=('offset',)),
        entry('v3.npy', npy_bytes(v3, (3, 0)), 8, cd64=(),
              pre_extra=struct.pack('<HHI', 0xCAFE, 4, 0xDEADBEEF)),
    ]
    write_zip(path('zip64.npz'), zentries, zip64=True, comment=b'halo zip64 fixture')
    with zipfile.ZipFile(path('zip64.npz')) as z:
        assert z.testzip() is None and z.comment == b'halo zip64 fixture'
    check_same(path('zip64.npz'), dict(v1=v1, v2=v2, v3=v3))

    with zipfile.ZipFile(path('bzip2.npz'), 'w', compression=zipfile.ZIP_BZIP2) as z:
        z.writestr('a.npy', npy_bytes(np.arange(3, dtype=np.int64)))

    with open(path('basic_compressed.npz'), 'rb') as f:
        whole = f.read()
    with open(path('truncated.npz'), 'wb') as f:
        f.write(whole[:len(whole) * 2 // 3])

    payload = npy_bytes(np.arange(100, dtype=np.int64))
    full = deflate(payload)
    cut = dict(name='a.npy', data=full[:len(full) // 2], method=8, crc=zlib.crc32(payload),
               usize=len(payload))
    write_zip(path('truncated_entry.npz'), [cut])

    data = bytearray(open(path('basic_stored.npz'), 'rb').read())
    start, _, _ = local_data_start(path('basic_stored.npz'), 'node_feat.npy')
    data[start + 128 + 5] ^= 0x40        # v1 header is 128 bytes; flip inside the payload
    open(path('corrupt_stored.npz'), 'wb').write(data)

    data = bytearray(whole)
    start, csize, _ = local_data_start(path('basic_compressed.npz'), 'edge_index.npy')
    data[start + csize // 2] ^= 0xFF
    open(path('corrupt_compressed.npz'), 'wb').write(data)

    for bad in ('corrupt_stored.npz', 'corrupt_compressed.npz', 'truncated_entry.npz'):
        with zipfile.ZipFile(path(bad)) as z:
            try:
                bad_name = z.testzip()
            except (zlib.error, EOFError, zipfile.BadZipFile):
                bad_name = 'error'
            assert bad_name is not None, bad


if __name__ == '__main__':
    main()

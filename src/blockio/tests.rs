use super::*;

const BLOCK_BYTES: usize = 16 << 10;
const BLOCK_COUNT: u64 = 24;
const POOL_COUNT: usize = 8;

/// A directory on the disk the tests run on (not necessarily one that
/// accepts O_DIRECT: `open` falls back where it is refused).
fn test_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("onitb-blockio-").tempdir().expect("a temporary directory")
}

/// Every io_uring test also runs where io_uring is refused: then it checks
/// the error and skips the rest.
fn block_io(choice: IoChoice, pool: &BufferPool, depth: u32) -> Option<BlockIo> {
    match BlockIo::new(choice, pool, depth) {
        Ok(io) => Some(io),
        Err(IoError::UringUnavailable { reason }) if choice == IoChoice::Uring => {
            eprintln!("skipping io_uring test: {reason}");
            None
        }
        Err(error) => panic!("{error}"),
    }
}

/// Distinct, position-dependent contents for block `block`.
fn fill_pattern(buf: &mut Buffer, block: u64) {
    for (word_index, word) in buf.as_u32s_mut().iter_mut().enumerate() {
        *word = (block as u32).wrapping_mul(0x9E37_79B9) ^ (word_index as u32);
    }
}

fn has_pattern(buf: &Buffer, block: u64) -> bool {
    buf.as_u32s()
        .iter()
        .enumerate()
        .all(|(word_index, &word)| word == (block as u32).wrapping_mul(0x9E37_79B9) ^ (word_index as u32))
}

/// A buffer from the pool, waiting for a completion if all are out.
fn next_buffer(io: &mut BlockIo, pool: &mut BufferPool) -> Buffer {
    if let Some(buf) = pool.take() {
        return buf;
    }
    let completion = io.wait().expect("a completion");
    completion.buf
}

fn write_blocks(io: &mut BlockIo, pool: &mut BufferPool, file: FileId) {
    for block in 0..BLOCK_COUNT {
        let mut buf = next_buffer(io, pool);
        fill_pattern(&mut buf, block);
        io.submit_write(file, block * BLOCK_BYTES as u64, BLOCK_BYTES, buf, block).unwrap();
    }
    while io.in_flight() > 0 {
        let completion = io.wait().unwrap();
        assert_eq!(completion.kind, IoKind::Write);
        pool.give(completion.buf);
    }
}

/// Block numbers 0..count in a fixed scrambled order.
fn shuffled(count: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..count).collect();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for index in (1..order.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(index, (state % (index as u64 + 1)) as usize);
    }
    order
}

fn read_and_check_blocks(io: &mut BlockIo, pool: &mut BufferPool, file: FileId) {
    let mut checked = 0;
    let mut check = |completion: Completion, pool: &mut BufferPool| {
        assert_eq!(completion.kind, IoKind::Read);
        assert!(has_pattern(&completion.buf, completion.tag), "block {}", completion.tag);
        checked += 1;
        pool.give(completion.buf);
    };
    for block in shuffled(BLOCK_COUNT) {
        let buf = match pool.take() {
            Some(buf) => buf,
            None => {
                let completion = io.wait().unwrap();
                let buf_index = completion.buf.index();
                check(completion, pool);
                let buf = pool.take().unwrap();
                assert_eq!(buf.index(), buf_index);
                buf
            }
        };
        io.submit_read(file, block * BLOCK_BYTES as u64, BLOCK_BYTES, buf, block).unwrap();
    }
    while io.in_flight() > 0 {
        check(io.wait().unwrap(), pool);
    }
    assert_eq!(checked, BLOCK_COUNT);
}

fn round_trip(choice: IoChoice, depth: u32) {
    round_trip_on(choice, depth, true);
}

fn round_trip_on(choice: IoChoice, depth: u32, try_direct: bool) {
    let dir = test_dir();
    let mut pool = BufferPool::new(POOL_COUNT, BLOCK_BYTES).unwrap();
    let Some(mut io) = block_io(choice, &pool, depth) else {
        return;
    };
    let file = io.open_with(&dir.path().join("blocks"), true, try_direct).unwrap();
    if !try_direct {
        assert!(!io.direct(file));
    }
    io.set_len(file, BLOCK_COUNT * BLOCK_BYTES as u64).unwrap();
    write_blocks(&mut io, &mut pool, file);
    io.sync(file).unwrap();
    read_and_check_blocks(&mut io, &mut pool, file);
    let bytes = BLOCK_COUNT * BLOCK_BYTES as u64;
    let expected = IoStats { bytes_read: bytes, bytes_written: bytes, reads: BLOCK_COUNT, writes: BLOCK_COUNT };
    assert_eq!(io.stats(), expected);
    assert_eq!(pool.free(), POOL_COUNT);
}

#[test]
fn uring_round_trip_with_several_in_flight() {
    round_trip(IoChoice::Uring, 4);
}

#[test]
fn uring_round_trip_with_queue_deeper_than_pool() {
    round_trip(IoChoice::Uring, 32);
}

#[test]
fn uring_round_trip_with_depth_one() {
    round_trip(IoChoice::Uring, 1);
}

#[test]
fn pread_round_trip() {
    round_trip(IoChoice::Pread, 4);
}

#[test]
fn round_trip_without_o_direct() {
    round_trip_on(IoChoice::Uring, 4, false);
    round_trip_on(IoChoice::Pread, 4, false);
}

#[test]
fn auto_round_trip() {
    round_trip(IoChoice::Auto, 4);
}

#[test]
fn both_back_ends_write_identical_files() {
    let dir = test_dir();
    let mut contents = Vec::new();
    for choice in [IoChoice::Pread, IoChoice::Uring] {
        let mut pool = BufferPool::new(POOL_COUNT, BLOCK_BYTES).unwrap();
        let Some(mut io) = block_io(choice, &pool, 4) else {
            return;
        };
        let path = dir.path().join(choice.to_string());
        let file = io.open(&path, true).unwrap();
        write_blocks(&mut io, &mut pool, file);
        io.sync(file).unwrap();
        drop(io);
        contents.push(std::fs::read(&path).unwrap());
    }
    assert_eq!(contents[0].len(), BLOCK_COUNT as usize * BLOCK_BYTES);
    assert!(contents[0] == contents[1], "files differ");
}

#[test]
fn reads_past_the_end_give_zeros() {
    let dir = test_dir();
    let path = dir.path().join("short");
    // 6000 bytes: the second 4096-byte block is partial, the rest missing.
    std::fs::write(&path, vec![0xAB; 6000]).unwrap();
    for choice in [IoChoice::Pread, IoChoice::Uring] {
        let mut pool = BufferPool::new(2, BLOCK_BYTES).unwrap();
        let Some(mut io) = block_io(choice, &pool, 2) else {
            continue;
        };
        let file = io.open(&path, false).unwrap();
        let mut buf = pool.take().unwrap();
        buf.fill(0xFF);
        io.submit_read(file, 0, BLOCK_BYTES, buf, 1).unwrap();
        let beyond = pool.take().unwrap();
        io.submit_read(file, 1 << 20, 8192, beyond, 2).unwrap();
        let mut seen = 0;
        while io.in_flight() > 0 {
            let completion = io.wait().unwrap();
            match completion.tag {
                1 => {
                    assert!(completion.buf[..6000].iter().all(|&b| b == 0xAB));
                    assert!(completion.buf[6000..].iter().all(|&b| b == 0));
                }
                _ => assert!(completion.buf[..8192].iter().all(|&b| b == 0)),
            }
            seen += 1;
        }
        assert_eq!(seen, 2, "{choice}");
    }
}

#[test]
fn preallocated_file_reads_zeros() {
    let dir = test_dir();
    for choice in [IoChoice::Pread, IoChoice::Uring] {
        let mut pool = BufferPool::new(1, BLOCK_BYTES).unwrap();
        let Some(mut io) = block_io(choice, &pool, 1) else {
            continue;
        };
        let file = io.open(&dir.path().join(format!("pre-{choice}")), true).unwrap();
        io.set_len(file, 4 * BLOCK_BYTES as u64).unwrap();
        let mut buf = pool.take().unwrap();
        buf.fill(1);
        io.submit_read(file, BLOCK_BYTES as u64, BLOCK_BYTES, buf, 0).unwrap();
        let completion = io.wait().unwrap();
        assert!(completion.buf.iter().all(|&b| b == 0));
        assert_eq!(std::fs::metadata(io.path(file)).unwrap().len(), 4 * BLOCK_BYTES as u64);
    }
}

#[test]
fn disk_full_returns_the_buffer() {
    let dev_full = Path::new("/dev/full");
    if !dev_full.exists() {
        return;
    }
    for choice in [IoChoice::Pread, IoChoice::Uring] {
        let mut pool = BufferPool::new(2, 4096).unwrap();
        let Some(mut io) = block_io(choice, &pool, 2) else {
            continue;
        };
        let file = io.open(dev_full, false).unwrap();
        let buf = pool.take().unwrap();
        io.submit_write(file, 0, 4096, buf, 77).unwrap();
        let error = io.wait().unwrap_err();
        assert!(matches!(&error, IoError::DiskFull { path } if path == dev_full), "{choice}: {error:?}");
        assert!(error.to_string().contains("/dev/full"), "{error}");
        assert_eq!(io.in_flight(), 0);
        let failed = io.reclaim().expect("the failed request's buffer");
        assert_eq!((failed.tag, failed.kind), (77, IoKind::Write));
        pool.give(failed.buf);
        assert!(io.reclaim().is_none());
        assert_eq!(pool.free(), 2);
        assert_eq!(io.stats(), IoStats::default());
    }
}

#[test]
fn errno_mapping() {
    let path = Path::new("/some/table");
    for errno in [libc::ENOSPC, libc::EDQUOT] {
        let error = map_io_error(io::Error::from_raw_os_error(errno), path, "write");
        assert!(matches!(error, IoError::DiskFull { ref path } if path == Path::new("/some/table")));
    }
    let error = map_io_error(io::Error::from_raw_os_error(libc::EIO), path, "read");
    assert!(matches!(error, IoError::Io { op: "read", .. }));
    let message = error.to_string();
    assert!(message.starts_with("read /some/table: "), "{message}");
}

#[test]
fn open_errors_name_the_path() {
    let pool = BufferPool::new(1, 4096).unwrap();
    let mut io = BlockIo::new(IoChoice::Pread, &pool, 1).unwrap();
    let error = io.open(Path::new("/nonexistent/dir/file"), true).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("open /nonexistent/dir/file"), "{message}");
}

#[test]
fn auto_falls_back_when_uring_setup_fails() {
    let pool = BufferPool::new(1, 4096).unwrap();
    let io = BlockIo::with_uring_failure(IoChoice::Auto, &pool, 4).unwrap();
    assert_eq!(io.backend(), IoBackendKind::Pread);
    let note = io.fallback_note().expect("a note");
    assert!(note.contains("injected") && note.contains("pread"), "{note}");

    let error = BlockIo::with_uring_failure(IoChoice::Uring, &pool, 4).unwrap_err();
    assert!(matches!(error, IoError::UringUnavailable { .. }));
    assert!(error.to_string().contains("injected"), "{error}");

    let io = BlockIo::with_uring_failure(IoChoice::Pread, &pool, 4).unwrap();
    assert!(io.fallback_note().is_none());
}

#[test]
fn uring_is_used_when_it_works() {
    let pool = BufferPool::new(2, 4096).unwrap();
    let Some(io) = block_io(IoChoice::Uring, &pool, 4) else {
        return;
    };
    assert_eq!(io.backend(), IoBackendKind::Uring);
    assert_eq!(io.queue_depth(), 4);
    let auto = BlockIo::new(IoChoice::Auto, &pool, 4).unwrap();
    assert_eq!(auto.backend(), IoBackendKind::Uring);
    assert!(auto.fallback_note().is_none());
    eprintln!("buffers registered: {}", io.buffers_registered());
}

#[test]
fn buffers_of_an_unregistered_pool_work_too() {
    let dir = test_dir();
    let registered = BufferPool::new(1, BLOCK_BYTES).unwrap();
    let mut other = BufferPool::new(POOL_COUNT, BLOCK_BYTES).unwrap();
    let Some(mut io) = block_io(IoChoice::Uring, &registered, 4) else {
        return;
    };
    let file = io.open(&dir.path().join("other"), true).unwrap();
    write_blocks(&mut io, &mut other, file);
    read_and_check_blocks(&mut io, &mut other, file);
}

#[test]
fn exhausted_pool_refills_after_wait() {
    let dir = test_dir();
    let mut pool = BufferPool::new(2, 4096).unwrap();
    let Some(mut io) = block_io(IoChoice::Auto, &pool, 2) else {
        return;
    };
    let file = io.open(&dir.path().join("exhaust"), true).unwrap();
    for tag in 0..2 {
        let buf = pool.take().unwrap();
        io.submit_write(file, tag * 4096, 4096, buf, tag).unwrap();
    }
    assert!(pool.take().is_none());
    assert_eq!(io.in_flight(), 2);
    let mut tags = Vec::new();
    while io.in_flight() > 0 {
        let completion = io.wait().unwrap();
        tags.push(completion.tag);
        pool.give(completion.buf);
    }
    tags.sort_unstable();
    assert_eq!(tags, [0, 1]);
    assert_eq!(pool.free(), 2);
}

#[test]
fn sync_keeps_completions_for_wait() {
    let dir = test_dir();
    let mut pool = BufferPool::new(4, 4096).unwrap();
    let Some(mut io) = block_io(IoChoice::Uring, &pool, 4) else {
        return;
    };
    let file = io.open(&dir.path().join("sync"), true).unwrap();
    for tag in 0..4 {
        let buf = pool.take().unwrap();
        io.submit_write(file, tag * 4096, 4096, buf, tag).unwrap();
    }
    io.sync(file).unwrap();
    assert_eq!(io.in_flight(), 4);
    for _ in 0..4 {
        pool.give(io.wait().unwrap().buf);
    }
    assert_eq!(std::fs::metadata(io.path(file)).unwrap().len(), 4 * 4096);
}

#[test]
fn drop_waits_for_requests_in_flight() {
    let dir = test_dir();
    let mut pool = BufferPool::new(POOL_COUNT, BLOCK_BYTES).unwrap();
    let Some(mut io) = block_io(IoChoice::Uring, &pool, POOL_COUNT as u32) else {
        return;
    };
    let file = io.open(&dir.path().join("drop"), true).unwrap();
    io.set_len(file, (POOL_COUNT * BLOCK_BYTES) as u64).unwrap();
    for tag in 0..POOL_COUNT as u64 {
        let buf = pool.take().unwrap();
        io.submit_read(file, tag * BLOCK_BYTES as u64, BLOCK_BYTES, buf, tag).unwrap();
    }
    drop(io);
    drop(pool);
}

#[test]
fn request_advance_continues_short_transfers() {
    let mut pool = BufferPool::new(1, 3 * 4096).unwrap();
    let mut buf = pool.take().unwrap();
    buf.fill(9);
    let mut request = Request {
        file: FileId(0),
        fd: -1,
        direct: true,
        kind: IoKind::Read,
        offset: 0,
        len: 3 * 4096,
        done_bytes: 0,
        retries: 0,
        buf,
        tag: 0,
    };
    assert!(matches!(request.advance(Ok(4096)), Progress::Again));
    let interrupted = io::Error::from_raw_os_error(libc::EINTR);
    assert!(matches!(request.advance(Err(interrupted)), Progress::Again));
    assert_eq!(request.done_bytes, 4096);
    // A partial block of an O_DIRECT file is its end: zeros after it.
    assert!(matches!(request.advance(Ok(100)), Progress::Complete));
    assert!(request.buf[..4196].iter().all(|&b| b == 9));
    assert!(request.buf[4196..].iter().all(|&b| b == 0));

    request.kind = IoKind::Write;
    request.done_bytes = 0;
    assert!(matches!(request.advance(Ok(4096)), Progress::Again));
    assert!(matches!(request.advance(Ok(0)), Progress::Failed(_)));
    for _ in 0..REQUEST_RETRIES_MAX - 1 {
        let again = request.advance(Err(io::Error::from_raw_os_error(libc::EAGAIN)));
        assert!(matches!(again, Progress::Again));
    }
    let again = request.advance(Err(io::Error::from_raw_os_error(libc::EAGAIN)));
    assert!(matches!(again, Progress::Failed(_)));
    let bad = request.advance(Err(io::Error::from_raw_os_error(libc::ENOSPC)));
    assert!(matches!(bad, Progress::Failed(_)));
}

#[test]
fn io_choice_parses_and_displays() {
    for choice in [IoChoice::Auto, IoChoice::Uring, IoChoice::Pread] {
        assert_eq!(choice.to_string().parse::<IoChoice>(), Ok(choice));
    }
    let error = "mmap".parse::<IoChoice>().unwrap_err();
    assert!(error.contains("auto, uring or pread"), "{error}");
    assert_eq!(IoBackendKind::Uring.to_string(), "uring");
}

#[test]
#[should_panic(expected = "not 4096-aligned")]
fn unaligned_offset_panics() {
    let dir = test_dir();
    let mut pool = BufferPool::new(1, 4096).unwrap();
    let mut io = BlockIo::new(IoChoice::Pread, &pool, 1).unwrap();
    let file = io.open(&dir.path().join("x"), true).unwrap();
    let buf = pool.take().unwrap();
    let _ = io.submit_read(file, 100, 4096, buf, 0);
}

/// A read into lent memory lands there, on both back ends, alongside pool
/// buffers in flight; its `Buffer` comes back lent, and the pool is whole.
#[test]
fn reads_into_lent_memory() {
    for choice in [IoChoice::Uring, IoChoice::Pread] {
        let dir = test_dir();
        let mut pool = BufferPool::new(POOL_COUNT, BLOCK_BYTES).unwrap();
        let Some(mut io) = block_io(choice, &pool, 4) else {
            continue;
        };
        let file = io.open(&dir.path().join("blocks"), true).unwrap();
        io.set_len(file, BLOCK_COUNT * BLOCK_BYTES as u64).unwrap();
        write_blocks(&mut io, &mut pool, file);
        // Lent memory: a spare pool buffer, two blocks of it.
        let mut spare = BufferPool::new(1, 2 * BLOCK_BYTES).unwrap().take().unwrap();
        let (first, second) = spare.split_at_mut(BLOCK_BYTES);
        for (tag, memory) in [(3, first), (7, second)] {
            // SAFETY: `memory` is not touched again until its completion
            // below has been dropped.
            let lent = unsafe { Buffer::lend(memory) };
            assert!(lent.is_lent());
            io.submit_read(file, tag * BLOCK_BYTES as u64, BLOCK_BYTES, lent, tag).unwrap();
            io.submit_read(file, (tag + 1) * BLOCK_BYTES as u64, BLOCK_BYTES, pool.take().unwrap(), tag + 1).unwrap();
        }
        while io.in_flight() > 0 {
            let completion = io.wait().unwrap();
            assert_eq!(completion.buf.is_lent(), completion.tag == 3 || completion.tag == 7);
            if !completion.buf.is_lent() {
                assert!(has_pattern(&completion.buf, completion.tag));
                pool.give(completion.buf);
            }
        }
        assert_eq!(pool.free(), POOL_COUNT);
        let words = spare.as_u32s();
        let expected = |block: u64, word: usize| (block as u32).wrapping_mul(0x9E37_79B9) ^ (word as u32);
        let block_words = BLOCK_BYTES / 4;
        assert!((0..block_words).all(|w| words[w] == expected(3, w)), "{choice}: first lent block");
        assert!((0..block_words).all(|w| words[block_words + w] == expected(7, w)), "{choice}: second lent block");
    }
}

#[test]
#[should_panic(expected = "not 4096-aligned")]
fn lending_unaligned_memory_panics() {
    let mut spare = BufferPool::new(1, 8192).unwrap().take().unwrap();
    // SAFETY: never submitted; it panics first.
    let _ = unsafe { Buffer::lend(&mut spare[8..4104]) };
}

#[test]
fn the_lowest_cgroup_memory_limit_above_the_process_counts() {
    let sys = test_dir();
    let write = |path: &str, text: &str| {
        let path = sys.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    // v2: the process's group has no limit, its parent 8 GiB, the
    // grandparent 16 GiB.
    write("a/memory.max", "17179869184\n");
    write("a/b/memory.max", "8589934592\n");
    write("a/b/c/memory.max", "max\n");
    assert_eq!(cgroup_memory_limit("0::/a/b/c\n", sys.path()), Some(8 << 30));
    assert_eq!(cgroup_memory_limit("0::/a\n", sys.path()), Some(16 << 30));
    // v1: "no limit" is a number near 2^63; the other controllers' lines
    // do not count.
    write("memory/x/memory.limit_in_bytes", "9223372036854771712\n");
    assert_eq!(cgroup_memory_limit("5:cpu:/a/b\n4:memory:/x\n0::/\n", sys.path()), None);
    write("memory/memory.limit_in_bytes", "4294967296\n");
    assert_eq!(cgroup_memory_limit("4:memory:/x\n", sys.path()), Some(4 << 30));
    assert_eq!(cgroup_memory_limit("garbage\n", sys.path()), None);
    // This machine says something.
    assert!(available_memory_bytes().is_some_and(|bytes| bytes > 0));
}

//! A call's recording: a stereo WAV file (the caller left, the agent right), written in whole
//! pages.
//!
//! The samples of a thousand calls reach the file system at 32 KB/s each, and what a write
//! costs it is counted in the pages it touches. The buffer is written out when it reaches the
//! next [`CHUNK`] boundary of the file, so every write but the last covers whole pages exactly
//! (the first one less the 44 bytes of header); a write that straddled them would touch one page
//! more, and a larger buffer would hold more of every call's memory for as long as it lives.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::Path;

/// Bytes a write covers: two pages, 128 ms of 8 kHz stereo (64 ms at 16 kHz).
const CHUNK: usize = 8 * 1024;

/// The stereo WAV writer.
pub(super) struct Recorder {
    writer: hound::WavWriter<PageWriter<File>>,
}

impl Recorder {
    /// Creates the file at `path` (and its directory) for a call at `rate` Hz. It blocks on the
    /// file system: call it off the async runtime.
    pub(super) fn create(path: &Path, rate: u32) -> Result<Recorder, hound::Error> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        Ok(Recorder {
            writer: hound::WavWriter::new(PageWriter::new(File::create(path)?), spec)?,
        })
    }

    /// Appends one frame: `left` (the caller) and `right` (the agent), interleaved.
    pub(super) fn frame(&mut self, left: &[i16], right: &[i16]) -> Result<(), hound::Error> {
        let mut w = self.writer.get_i16_writer((left.len() * 2) as u32);
        for (l, r) in left.iter().zip(right) {
            w.write_sample(*l);
            w.write_sample(*r);
        }
        w.flush()
    }

    /// Writes what is buffered and the header's final sizes.
    pub(super) fn finish(self) -> Result<(), hound::Error> {
        self.writer.finalize()
    }
}

/// A buffered writer whose writes end on the file's [`CHUNK`] boundaries.
struct PageWriter<W: Write + Seek> {
    inner: W,
    buf: Vec<u8>,
    /// Where in the file the buffer's first byte goes.
    at: u64,
}

impl<W: Write + Seek> PageWriter<W> {
    fn new(inner: W) -> Self {
        PageWriter {
            inner,
            buf: Vec::with_capacity(CHUNK),
            at: 0,
        }
    }

    /// Bytes the buffer takes before its end meets the next boundary.
    fn room(&self) -> usize {
        CHUNK - (self.at as usize + self.buf.len()) % CHUNK
    }

    fn write_out(&mut self) -> io::Result<()> {
        self.inner.write_all(&self.buf)?;
        self.at += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

impl<W: Write + Seek> Write for PageWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(self.room());
        self.buf.extend_from_slice(&data[..n]);
        if self.room() == CHUNK {
            self.write_out()?;
        }
        Ok(n)
    }

    /// Writes the buffer out now (the WAV writer flushes only when it finishes the file).
    fn flush(&mut self) -> io::Result<()> {
        self.write_out()?;
        self.inner.flush()
    }
}

impl<W: Write + Seek> Seek for PageWriter<W> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.write_out()?;
        self.inner.flush()?;
        self.at = self.inner.seek(to)?;
        Ok(self.at)
    }
}

impl<W: Write + Seek> Drop for PageWriter<W> {
    fn drop(&mut self) {
        let _ = self.write_out();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::io::Cursor;
    use std::rc::Rc;

    /// The file, and where each write that reached it started and how long it was.
    #[derive(Default)]
    struct Written {
        file: Cursor<Vec<u8>>,
        writes: Vec<(u64, usize)>,
    }

    struct Spy(Rc<RefCell<Written>>);

    impl Write for Spy {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            let mut w = self.0.borrow_mut();
            let at = w.file.position();
            w.writes.push((at, data.len()));
            w.file.write(data)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Seek for Spy {
        fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
            self.0.borrow_mut().file.seek(to)
        }
    }

    #[test]
    fn writes_end_on_chunk_boundaries_and_the_file_is_whole() {
        let written = Rc::new(RefCell::new(Written::default()));
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: 8000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::new(PageWriter::new(Spy(written.clone())), spec).unwrap();
        // 3 s of 20 ms frames: 96,000 bytes of samples after the 44 of the header.
        for f in 0..150i16 {
            let mut frame = w.get_i16_writer(320);
            for s in 0..160i16 {
                frame.write_sample(f);
                frame.write_sample(s);
            }
            frame.flush().unwrap();
        }
        w.finalize().unwrap();
        let Written { file, writes } = Rc::try_unwrap(written).ok().unwrap().into_inner();
        // The samples in whole chunks, each ending on a boundary, then the rest; then the
        // header's two sizes, written in place.
        let (samples, sizes) = writes.split_at(writes.len() - 2);
        assert_eq!(sizes, [(4, 4), (40, 4)], "{writes:?}");
        let (last, whole) = samples.split_last().unwrap();
        assert_eq!(whole.len(), (44 + 96_000) / CHUNK, "{writes:?}");
        for (at, len) in whole {
            assert_eq!((*at as usize + len) % CHUNK, 0, "{writes:?}");
        }
        assert_eq!(last.0 as usize + last.1, 44 + 96_000);
        // The file reads back as written.
        let mut reader = hound::WavReader::new(Cursor::new(file.into_inner())).unwrap();
        assert_eq!(reader.duration(), 150 * 160);
        let read: Vec<i16> = reader.samples::<i16>().map(|s| s.unwrap()).collect();
        assert_eq!(read.len(), 150 * 320);
        assert_eq!((read[0], read[1], read[320], read[321]), (0, 0, 1, 0));
        assert_eq!((read[read.len() - 2], read[read.len() - 1]), (149, 159));
    }
}

//! The media workers: a few threads carry every call's audio, one frame every 20 ms each.
//!
//! A call's media is a [`Stream`]: its own socket and state. A worker owns the streams given to
//! it, spread over ten phases of the frame 2 ms apart, and when a phase is due it runs each of
//! its streams in turn: the stream reads what its socket holds since its last frame, works out
//! its frame and sends its packet. Between phases the worker sleeps, and wakes only for the
//! messages its streams' handles send (a command, a stop, a new stream), which it serves at
//! once; a worker with no streams sleeps until it is given one.
//!
//! This is what lets a small box carry a thousand calls: a task woken per packet and per tick,
//! as each call had before, cost two wake-ups and a readiness poll per packet on top of the
//! packet's own system calls, and when the cores were busy each call's frame waited its turn
//! behind the rest of the runtime's work (the agents, the signalling, the store). Here a frame is
//! a plain function call on a thread that does nothing else, and the streams of a worker share
//! one timer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// One frame of audio.
const FRAME: Duration = Duration::from_millis(20);

/// Upper bounds, in milliseconds, of the buckets [`WorkerFigures::lag`] counts frame passes in
/// (a last bucket counts the rest).
pub const LAG_BUCKETS_MS: [u64; 7] = [1, 2, 5, 10, 20, 50, 100];

/// A worker this many frames behind (the machine stalled) starts its clock again rather than
/// running the frames it missed back to back.
const MAX_BEHIND: u32 = 5;

/// A worker's streams are spread over this many phases of the frame, [`SLOT`] apart, so their
/// packets go out spread over the 20 ms (as independent phones' do) rather than in one burst,
/// and each pass is short.
const SLOTS: usize = 10;
const SLOT: Duration = Duration::from_millis(2);

/// The time slice media threads ask the scheduler for. A frame is due every 2 ms on some
/// phase and takes well under a millisecond; with the kernel's default slice (about 3 ms) a
/// media thread woken on a busy machine waits behind other threads' whole slices. A short
/// slice (Linux 6.12 and later, EEVDF's `sched_runtime` for ordinary threads) gets it
/// scheduled sooner when it wakes, without giving
/// it a larger share of the CPU than any other thread. (A raised priority was tried: with the
/// cores short, the agents' work then waited instead, and turns took longer.)
const MEDIA_SLICE_NS: u64 = 300_000;

/// `struct sched_attr` (its first version, 56 bytes), as `sched_setattr(2)` takes it.
#[repr(C)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// Asks for [`MEDIA_SLICE_NS`] for the calling thread; on a kernel without custom slices it
/// keeps the default, said once.
fn request_short_slice() {
    if let Err(why) = set_short_slice() {
        static TOLD: std::sync::Once = std::sync::Once::new();
        TOLD.call_once(|| {
            tracing::info!(error = %why, "media threads keep the scheduler's default time slice");
        });
    }
}

fn set_short_slice() -> std::io::Result<()> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: MEDIA_SLICE_NS,
        sched_deadline: 0,
        sched_period: 0,
        sched_util_min: 0,
        sched_util_max: 0,
    };
    // SAFETY: sched_setattr(0, attr, 0) changes the calling thread's scheduling only; `attr`
    // is a live, fully initialized struct of the size its `size` field states, which the
    // kernel only reads.
    let done = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &raw const attr, 0u32) };
    if done != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// One call's media as a worker runs it.
pub trait Stream: Send + 'static {
    /// What its handle may ask of it while it runs.
    type Command: Send + 'static;
    /// What it leaves when it ends.
    type Done: Send + 'static;

    /// A command from its handle, served as it comes (between frames).
    fn command(&mut self, command: Self::Command);

    /// One frame: reads what arrived since the last, then sends what it has. `false` once the
    /// stream is over by itself (it is then finished).
    fn frame(&mut self) -> bool;

    /// The stream ends: stopped by its handle, over by itself, or its handle dropped.
    fn finish(self) -> Self::Done;
}

enum Message<S: Stream> {
    Start(Box<Started<S>>),
    Command(u64, S::Command),
    Stop(u64),
}

struct Started<S: Stream> {
    id: u64,
    stream: S,
    done: oneshot::Sender<S::Done>,
}

struct Worker<S: Stream> {
    messages: mpsc::Sender<Message<S>>,
    figures: Arc<Figures>,
}

/// What a worker has done, as it goes.
#[derive(Default)]
struct Figures {
    /// Streams it runs (for placing the next one).
    streams: AtomicUsize,
    passes: AtomicU64,
    busy_us: AtomicU64,
    lag_us: AtomicU64,
    lag: [AtomicU64; LAG_BUCKETS_MS.len() + 1],
}

impl Figures {
    /// A frame pass due at `due` ran from `started` to `ended`.
    fn pass(&self, due: Instant, started: Instant, ended: Instant) {
        let lag = ended.saturating_duration_since(due);
        self.passes.fetch_add(1, Ordering::Relaxed);
        self.busy_us
            .fetch_add((ended - started).as_micros() as u64, Ordering::Relaxed);
        self.lag_us
            .fetch_add(lag.as_micros() as u64, Ordering::Relaxed);
        let ms = lag.as_micros() as f64 / 1000.0;
        let bucket = LAG_BUCKETS_MS
            .iter()
            .position(|b| ms <= *b as f64)
            .unwrap_or(LAG_BUCKETS_MS.len());
        self.lag[bucket].fetch_add(1, Ordering::Relaxed);
    }
}

/// One media worker's figures since it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerFigures {
    /// Streams it runs now.
    pub streams: usize,
    /// Frame passes run (one per phase with streams, each every 20 ms).
    pub passes: u64,
    /// Time spent running streams' frames.
    pub busy: Duration,
    /// The passes by how late each ended against its due time (the delay the pass's last
    /// stream's packet saw): per bucket of [`LAG_BUCKETS_MS`], then the rest.
    pub lag: [u64; LAG_BUCKETS_MS.len() + 1],
    /// All those delays added up.
    pub lag_total: Duration,
}

/// A pool of media threads running streams of one kind.
pub struct Workers<S: Stream> {
    threads: Vec<Worker<S>>,
    next_id: AtomicU64,
}

impl<S: Stream> Workers<S> {
    /// Starts `threads` workers (0: one per core), named `name-0`, `name-1`, ...
    pub fn start(name: &str, threads: usize) -> std::io::Result<Workers<S>> {
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let mut workers = Vec::new();
        for i in 0..threads {
            let (tx, rx) = mpsc::channel();
            let figures = Arc::new(Figures::default());
            let counted = figures.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    request_short_slice();
                    run(rx, &counted)
                })?;
            workers.push(Worker {
                messages: tx,
                figures,
            });
        }
        Ok(Workers {
            threads: workers,
            next_id: AtomicU64::new(1),
        })
    }

    /// Each worker's figures so far.
    pub fn figures(&self) -> Vec<WorkerFigures> {
        self.threads
            .iter()
            .map(|w| {
                let f = &w.figures;
                WorkerFigures {
                    streams: f.streams.load(Ordering::Relaxed),
                    passes: f.passes.load(Ordering::Relaxed),
                    busy: Duration::from_micros(f.busy_us.load(Ordering::Relaxed)),
                    lag: std::array::from_fn(|i| f.lag[i].load(Ordering::Relaxed)),
                    lag_total: Duration::from_micros(f.lag_us.load(Ordering::Relaxed)),
                }
            })
            .collect()
    }

    /// Hands `stream` to the worker that runs the fewest; it runs from that worker's next frame.
    pub fn add(&self, stream: S) -> StreamHandle<S> {
        let worker = self
            .threads
            .iter()
            .min_by_key(|w| w.figures.streams.load(Ordering::Relaxed))
            .unwrap_or(&self.threads[0]);
        worker.figures.streams.fetch_add(1, Ordering::Relaxed);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (done_tx, done_rx) = oneshot::channel();
        let started = Started {
            id,
            stream,
            done: done_tx,
        };
        if let Err(mpsc::SendError(Message::Start(started))) =
            worker.messages.send(Message::Start(Box::new(started)))
        {
            // The worker is gone (it can only have panicked): the stream ends unrun.
            let _ = started.done.send(started.stream.finish());
        }
        StreamHandle {
            control: StreamControl {
                id,
                messages: worker.messages.clone(),
            },
            done: Some(done_rx),
        }
    }
}

/// A cloneable way to send a running stream commands.
pub struct StreamControl<S: Stream> {
    id: u64,
    messages: mpsc::Sender<Message<S>>,
}

impl<S: Stream> Clone for StreamControl<S> {
    fn clone(&self) -> Self {
        StreamControl {
            id: self.id,
            messages: self.messages.clone(),
        }
    }
}

impl<S: Stream> StreamControl<S> {
    /// Sends a command; one for a stream that has ended is dropped.
    pub fn send(&self, command: S::Command) {
        let _ = self.messages.send(Message::Command(self.id, command));
    }
}

/// The owner's side of a running stream. Dropped without [`StreamHandle::finish`], it stops
/// the stream.
pub struct StreamHandle<S: Stream> {
    control: StreamControl<S>,
    done: Option<oneshot::Receiver<S::Done>>,
}

impl<S: Stream> StreamHandle<S> {
    pub fn control(&self) -> StreamControl<S> {
        self.control.clone()
    }

    /// Stops the stream and returns what it leaves (none if its worker is gone).
    pub async fn finish(mut self) -> Option<S::Done> {
        let _ = self.control.messages.send(Message::Stop(self.control.id));
        self.done.take()?.await.ok()
    }

    /// Waits for the stream to end by itself and returns what it leaves.
    pub async fn ended(mut self) -> Option<S::Done> {
        self.done.take()?.await.ok()
    }
}

impl<S: Stream> Drop for StreamHandle<S> {
    fn drop(&mut self) {
        if self.done.is_some() {
            let _ = self.control.messages.send(Message::Stop(self.control.id));
        }
    }
}

struct Running<S: Stream> {
    id: u64,
    stream: S,
    done: oneshot::Sender<S::Done>,
}

impl<S: Stream> Running<S> {
    fn end(self) {
        let _ = self.done.send(self.stream.finish());
    }
}

/// One of a worker's [`SLOTS`] phases: its streams, and when their next frame is due.
struct Slot<S: Stream> {
    due: Instant,
    streams: Vec<Running<S>>,
}

/// A worker's streams by phase. Slot `s` runs at `origin + s * SLOT + n * FRAME`.
struct Slots<S: Stream> {
    origin: Instant,
    slots: Vec<Slot<S>>,
}

impl<S: Stream> Slots<S> {
    fn new() -> Slots<S> {
        let origin = Instant::now();
        Slots {
            origin,
            slots: (0..SLOTS)
                .map(|s| Slot {
                    due: origin + SLOT * s as u32,
                    streams: Vec::new(),
                })
                .collect(),
        }
    }

    /// The first time slot `s` is due at or after `now`.
    fn due_after(&self, s: usize, now: Instant) -> Instant {
        let base = self.origin + SLOT * s as u32;
        if now <= base {
            return base;
        }
        let frames = (now - base).as_nanos().div_ceil(FRAME.as_nanos());
        base + FRAME * frames as u32
    }

    /// The slot that runs next, and when: the earliest due of those with streams.
    fn next(&self) -> Option<(usize, Instant)> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.streams.is_empty())
            .map(|(i, s)| (i, s.due))
            .min_by_key(|(_, due)| *due)
    }

    /// A new stream joins the slot with the fewest.
    fn add(&mut self, running: Running<S>) {
        let (s, _) = self
            .slots
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| s.streams.len())
            .unwrap_or((0, &self.slots[0]));
        if self.slots[s].streams.is_empty() {
            self.slots[s].due = self.due_after(s, Instant::now());
        }
        self.slots[s].streams.push(running);
    }

    fn find(&mut self, id: u64) -> Option<(usize, usize)> {
        self.slots.iter().enumerate().find_map(|(s, slot)| {
            slot.streams
                .iter()
                .position(|r| r.id == id)
                .map(|at| (s, at))
        })
    }

    /// Runs slot `s`'s frames; returns the streams over by themselves, to be ended.
    fn run(&mut self, s: usize) -> Vec<Running<S>> {
        let slot = &mut self.slots[s];
        let mut ended = Vec::new();
        let mut i = 0;
        while i < slot.streams.len() {
            if slot.streams[i].stream.frame() {
                i += 1;
            } else {
                ended.push(slot.streams.swap_remove(i));
            }
        }
        slot.due += FRAME;
        let now = Instant::now();
        if now > slot.due + FRAME * MAX_BEHIND {
            self.slots[s].due = self.due_after(s, now);
        }
        ended
    }
}

/// A worker's loop: messages served as they come, each slot's frames when they are due.
fn run<S: Stream>(messages: mpsc::Receiver<Message<S>>, figures: &Figures) {
    let mut slots = Slots::new();
    let mut open = true;
    loop {
        let Some((s, due)) = slots.next() else {
            // Nothing to run: sleep until a handle sends something.
            match messages.recv() {
                Ok(message) => serve(message, &mut slots, figures),
                Err(_) => return,
            }
            continue;
        };
        let now = Instant::now();
        if now < due {
            if !open {
                std::thread::sleep(due - now);
            } else {
                match messages.recv_timeout(due - now) {
                    Ok(message) => {
                        serve(message, &mut slots, figures);
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    // Every handle and the pool are gone: what runs runs out.
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        open = false;
                        continue;
                    }
                }
            }
        }
        // A worker that runs late (the machine is busy) still serves its handles before each
        // pass: a command waits at most one pass, never for the worker to catch up.
        while let Ok(message) = messages.try_recv() {
            serve(message, &mut slots, figures);
        }
        let started = Instant::now();
        let ended = slots.run(s);
        figures.pass(due, started, Instant::now());
        // Counted out before their owners hear they ended.
        figures.streams.fetch_sub(ended.len(), Ordering::Relaxed);
        ended.into_iter().for_each(Running::end);
    }
}

fn serve<S: Stream>(message: Message<S>, slots: &mut Slots<S>, figures: &Figures) {
    match message {
        Message::Start(started) => {
            let Started { id, stream, done } = *started;
            slots.add(Running { id, stream, done });
        }
        Message::Command(id, command) => {
            if let Some((s, at)) = slots.find(id) {
                slots.slots[s].streams[at].stream.command(command);
            }
        }
        Message::Stop(id) => {
            if let Some((s, at)) = slots.find(id) {
                let running = slots.slots[s].streams.swap_remove(at);
                figures.streams.fetch_sub(1, Ordering::Relaxed);
                running.end();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Counts its frames; over after `last` of them.
    struct Counter {
        frames: u32,
        last: u32,
        seen: Arc<Mutex<Vec<u32>>>,
    }

    impl Stream for Counter {
        type Command = u32;
        type Done = u32;
        fn command(&mut self, command: u32) {
            self.seen.lock().unwrap().push(command);
        }
        fn frame(&mut self) -> bool {
            self.frames += 1;
            self.frames < self.last
        }
        fn finish(self) -> u32 {
            self.frames
        }
    }

    fn counter(last: u32) -> (Counter, Arc<Mutex<Vec<u32>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let c = Counter {
            frames: 0,
            last,
            seen: seen.clone(),
        };
        (c, seen)
    }

    #[tokio::test]
    async fn a_stream_runs_a_frame_every_20_ms_and_serves_commands_between() {
        let workers = Workers::start("test-media", 2).unwrap();
        let (c, seen) = counter(u32::MAX);
        let handle = workers.add(c);
        handle.control().send(7);
        let started = Instant::now();
        tokio::time::sleep(Duration::from_millis(210)).await;
        let frames = handle.finish().await.unwrap();
        let elapsed = started.elapsed().as_millis() as u32;
        assert!(
            frames >= 5 && frames <= elapsed / 20 + 1,
            "{frames} frames in {elapsed} ms"
        );
        assert_eq!(*seen.lock().unwrap(), vec![7]);
    }

    #[tokio::test]
    async fn a_stream_over_by_itself_ends_and_the_next_goes_to_the_idler_worker() {
        let workers = Workers::start("test-media", 2).unwrap();
        let (short, _) = counter(3);
        let (long, _) = counter(u32::MAX);
        let short = workers.add(short);
        let long = workers.add(long);
        let streams = |w: &Workers<Counter>| -> Vec<usize> {
            w.figures().iter().map(|f| f.streams).collect()
        };
        assert_eq!(streams(&workers), [1, 1]);
        assert_eq!(short.ended().await, Some(3));
        assert_eq!(streams(&workers), [0, 1]);
        // Dropped, the handle stops its stream.
        drop(long);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(streams(&workers), [0, 0]);
        let figures = workers.figures();
        assert!(figures.iter().all(|f| f.passes > 0));
        assert_eq!(
            figures[0].lag.iter().sum::<u64>(),
            figures[0].passes,
            "every pass is in a bucket"
        );
    }
}

// `#[trace]` on methods: every receiver, associated fns, trait default
// methods and trait impls.
use minitrace::prelude::*;

#[derive(Clone, Default)]
struct Counter {
    count: u64,
}

impl Counter {
    #[trace]
    fn new() -> Self {
        Counter::default()
    }

    #[trace]
    fn get(&self) -> u64 {
        self.count
    }

    #[trace(properties = { "by": "{by}" })]
    fn add(&mut self, by: u64) -> &mut Self {
        self.count += by;
        self
    }

    #[trace]
    fn into_count(self) -> u64 {
        self.count
    }

    #[trace]
    fn boxed(self: Box<Self>) -> u64 {
        self.count
    }

    #[trace]
    async fn get_async(&self) -> u64 {
        self.count
    }

    #[trace]
    async fn add_async(&mut self, by: u64) -> u64 {
        self.count += by;
        self.count
    }

    #[trace]
    async fn into_count_async(self) -> u64 {
        self.count
    }
}

trait Describe {
    fn name(&self) -> String;

    #[trace]
    fn describe(&self) -> String {
        format!("<{}>", self.name())
    }
}

impl Describe for Counter {
    #[trace(short_name = true)]
    fn name(&self) -> String {
        self.count.to_string()
    }
}

fn main() {
    let mut counter = Counter::new();
    counter.add(1).add(2);
    assert_eq!(counter.get(), 3);
    assert_eq!(counter.describe(), "<3>");
    assert_eq!(futures::executor::block_on(counter.add_async(1)), 4);
    assert_eq!(futures::executor::block_on(counter.get_async()), 4);
    assert_eq!(Box::new(counter.clone()).boxed(), 4);
    assert_eq!(futures::executor::block_on(counter.clone().into_count_async()), 4);
    assert_eq!(counter.into_count(), 4);
}

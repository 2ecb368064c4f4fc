use nvcre_engine::{Expr, Scope};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&args[1]).unwrap()).unwrap();
    let mut s = Scope::new();
    s.bind("object", &doc);
    for e in &args[2..] {
        println!("{e} => {:?}", Expr::compile(e).map(|x| x.eval(&s)));
    }
}

// Loads a HuggingFace checkpoint folder (config.json + model.safetensors;
// BERT, GPT-2 or ALBERT) and prints the relative residual of every layer,
// for the model as trained and for its pure-attention variant (SAN).
//
//   example_hf_residuals FOLDER [TOKEN_IDS]      e.g. ../shared/data/real-models/gpt2-capp 1,5,9,2
//
// Exits with 77 ("skipped") when FOLDER does not exist.
#include <sanpath/analysis/forward.hpp>
#include <sanpath/io/checkpoint.hpp>

#include <filesystem>
#include <iostream>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: example_hf_residuals FOLDER [TOKEN_IDS]\n";
    return 2;
  }
  const std::string folder = argv[1];
  if (!std::filesystem::exists(folder)) {
    std::cout << "skipped: " << folder << " does not exist\n";
    return 77;
  }
  try {
    const sanpath::Model model = sanpath::load_model(folder);
    const auto input = sanpath::InputSpec::from_tokens(sanpath::parse_token_list(argc > 2 ? argv[2] : "1,5,9,2,7,3"));
    const sanpath::Architecture& arch = model.arch();
    std::cout << folder << ": L=" << arch.layers << " H=" << arch.heads << " d=" << arch.d_model << "\n";

    const sanpath::Variant variants[] = {arch.variant, sanpath::Variant::san(arch.variant.mask)};
    const char* names[] = {"as trained", "SAN"};
    for (int v = 0; v < 2; ++v) {
      const sanpath::ForwardAnalysis a =
          sanpath::analyze_forward(model, variants[v], input, sanpath::PrecisionRequest{});
      std::cout << names[v] << " (" << a.precision.name() << "):\n";
      for (const sanpath::LayerReport& layer : a.layers)
        std::cout << "  layer " << layer.layer << "  " << layer.relative_residual.str() << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "example_hf_residuals: error: " << e.what() << "\n";
    return 1;
  }
}
